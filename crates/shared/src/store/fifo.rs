//! A FIFO endpoint's progress (`fifo_state`): the runner that holds one (a lease
//! fenced by a token) reads its next batch from the sink's log, keeps the
//! batch's end so a retry resends the same batch, and moves on past it once it
//! succeeded or was given up. Every write after the pick is fenced by the token.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{
    sinks::{self, Logged, Position},
    usage, StoreError,
};
use crate::ids::{AppId, AttemptId, EndpointId, TenantId};

/// A FIFO endpoint a runner holds.
#[derive(Debug, Clone)]
pub struct Held {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
    /// The order key this turn is for (`''`: the endpoint is not keyed).
    pub key: String,
    pub token: i64,
    /// Delivered up to here.
    pub pos: Position,
    /// The batch in flight ends here, if one was formed.
    pub batch_end: Option<Position>,
    pub tries: i32,
}

/// Makes a FIFO endpoint's progress row for its unkeyed order (in the
/// transaction that makes the endpoint; a keyed one's rows are made per key by
/// the fan-out).
pub async fn init(db: &impl GenericClient, tenant: &TenantId, app: &AppId, ep: &EndpointId) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO fifo_state (tenant_id, app_id, endpoint_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        &[&tenant.as_str(), &app.as_str(), &ep.as_str()],
    )
    .await?;
    Ok(())
}

/// Holds the FIFO endpoint of any tenant whose turn came longest ago and that has
/// messages past its position (below the horizon), for `lease_secs`; `None` if none waits.
pub async fn pick(db: &impl GenericClient, token: i64, lease_secs: f64) -> Result<Option<Held>, StoreError> {
    let row = db
        .query_opt(
            "WITH c AS (
                SELECT s.tenant_id, s.app_id, s.endpoint_id, s.key FROM fifo_state s
                JOIN endpoints e ON e.tenant_id = s.tenant_id AND e.app_id = s.app_id AND e.id = s.endpoint_id
                WHERE s.next_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now())
                  AND NOT e.disabled AND e.kind = 7
                  AND EXISTS (SELECT 1 FROM sink_log l
                      WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                        AND l.key = s.key AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq)
                        AND l.xid < pg_snapshot_xmin(pg_current_snapshot()))
                ORDER BY s.next_at LIMIT 1
                FOR UPDATE OF s SKIP LOCKED
             )
             UPDATE fifo_state s SET lease_until = now() + $2 * interval '1 second', lease_token = $1
             FROM c WHERE s.tenant_id = c.tenant_id AND s.app_id = c.app_id AND s.endpoint_id = c.endpoint_id
                 AND s.key = c.key
             RETURNING s.tenant_id, s.app_id, s.endpoint_id, s.pos_xid::text, s.pos_seq,
                 s.batch_xid::text, s.batch_seq, s.tries, s.key",
            &[&token, &lease_secs],
        )
        .await?;
    Ok(row.map(|r| {
        let batch_xid: Option<String> = r.get(5);
        let batch_seq: Option<i64> = r.get(6);
        Held {
            tenant_id: TenantId::from_db(r.get(0)),
            app_id: AppId::from_db(r.get(1)),
            endpoint_id: EndpointId::from_db(r.get(2)),
            key: r.get(8),
            token,
            pos: Position { xid: r.get::<_, String>(3).parse().unwrap_or(0), seq: r.get(4) },
            batch_end: batch_xid.zip(batch_seq).map(|(x, s)| Position { xid: x.parse().unwrap_or(0), seq: s }),
            tries: r.get(7),
        }
    }))
}

/// Where the log of the held endpoint (and key) ends below the horizon, past its
/// position: where to move when every message after the position is gone
/// (pruned by a tenant's shorter retention).
pub async fn log_end(db: &impl GenericClient, tenant: &TenantId, h: &Held) -> Result<Option<Position>, StoreError> {
    let row = db
        .query_opt(
            "SELECT xid::text, seq FROM sink_log
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = $4
               AND (xid, seq) > ($5::text::xid8, $6::bigint) AND xid < pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY xid DESC, seq DESC LIMIT 1",
            &[
                &tenant.as_str(),
                &h.app_id.as_str(),
                &h.endpoint_id.as_str(),
                &h.key,
                &h.pos.xid.to_string(),
                &h.pos.seq,
            ],
        )
        .await?;
    Ok(row.map(|r| Position { xid: r.get::<_, String>(0).parse().unwrap_or(0), seq: r.get(1) }))
}

/// The held endpoint's batch: the one in flight, or up to `size` messages past its position.
pub async fn batch(db: &impl GenericClient, tenant: &TenantId, h: &Held, size: i64) -> Result<Vec<Logged>, StoreError> {
    // A held batch is resent whole, up to its kept end, whatever `batchSize`
    // says now: lowered since it was cut, it would otherwise go shorter under the
    // same `webhook-id`.
    match h.batch_end {
        Some(end) => sinks::read_upto(db, tenant, &h.app_id, &h.endpoint_id, &h.key, h.pos, end, MOST_BATCH).await,
        None => sinks::read(db, tenant, &h.app_id, &h.endpoint_id, &h.key, h.pos, size, None, None).await,
    }
}

/// The largest `batchSize` a FIFO endpoint may have (the API's bound): no held
/// batch holds more.
pub const MOST_BATCH: i64 = 1000;

/// Keeps the batch's end, so that its retries send the same messages. False if
/// the lease passed on.
pub async fn hold_batch(
    db: &impl GenericClient,
    tenant: &TenantId,
    h: &Held,
    end: Position,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE fifo_state SET batch_xid = $5::text::xid8, batch_seq = $6
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = $7 AND lease_token = $4",
            &[
                &tenant.as_str(),
                &h.app_id.as_str(),
                &h.endpoint_id.as_str(),
                &h.token,
                &end.xid.to_string(),
                &end.seq,
                &h.key,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// What became of a batch.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Not sent yet (a batch still filling): due again at this time.
    Wait(DateTime<Utc>),
    /// Delivered, or given up: the position moves past it. `drained`: nothing
    /// more waited, so the row rests until the fan-out makes it due again (or a
    /// minute passes, for a message that raced with this end).
    Past { end: Position, drained: bool },
    /// Failed, to be retried at `at`: the same batch, up to `end` (the last
    /// message sent, kept for the retries whatever the turn's `Held` said: on a
    /// first try it was cut in this very turn).
    Retry { at: DateTime<Utc>, end: Position },
}

/// One attempt's record, written for each message of the batch.
#[derive(Debug, Clone)]
pub struct BatchAttempt {
    pub msg_ids: Vec<String>,
    pub url: String,
    pub success: bool,
    pub status_code: i16,
    pub response: String,
    pub duration_ms: i64,
    pub request_headers: String,
    /// The request body's size, counted once in the tenant's `bytes_out`.
    pub bytes: i64,
}

/// Ends the held turn, fenced by its token: moves the position or schedules the
/// retry, records the attempt for each message, and marks the endpoint failing or
/// not. False if the lease had passed on (nothing written).
pub async fn end(
    db: &impl GenericClient,
    tenant: &TenantId,
    h: &Held,
    ended: &Ended,
    attempt: Option<&BatchAttempt>,
) -> Result<bool, StoreError> {
    let (pos, batch, tries, next_at) = match ended {
        Ended::Wait(at) => (h.pos, h.batch_end, h.tries, *at),
        Ended::Past { end, drained: false } => (*end, None, 0, Utc::now()),
        Ended::Past { end, drained: true } => (*end, None, 0, Utc::now() + chrono::Duration::seconds(60)),
        Ended::Retry { at, end } => (h.pos, Some(*end), h.tries + 1, *at),
    };
    let n = db
        .execute(
            "UPDATE fifo_state SET pos_xid = $5::text::xid8, pos_seq = $6, batch_xid = $7::text::xid8, batch_seq = $8,
                tries = $9, next_at = $10, lease_until = NULL, lease_token = NULL
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = $11 AND lease_token = $4",
            &[
                &tenant.as_str(),
                &h.app_id.as_str(),
                &h.endpoint_id.as_str(),
                &h.token,
                &pos.xid.to_string(),
                &pos.seq,
                &batch.map(|b| b.xid.to_string()),
                &batch.map(|b| b.seq),
                &tries,
                &next_at,
                &h.key,
            ],
        )
        .await?;
    if n != 1 {
        return Ok(false);
    }
    let Some(a) = attempt else { return Ok(true) };
    let ids: Vec<String> = a.msg_ids.iter().map(|_| AttemptId::generate().to_string()).collect();
    // One attempt per message of the batch, counted in the tenant's usage as any
    // attempt is (the request's bytes once, on its first message).
    let sql = format!(
        "WITH ins AS (
            INSERT INTO attempts (tenant_id, app_id, id, msg_id, endpoint_id, url, status, trigger_type,
                response_status_code, response, response_duration_ms, request_headers)
            SELECT $1, $2, u.id, u.msg_id, $3, $6, $7, 0, $8, $9, $10, $11::text::jsonb
            FROM unnest($4::text[], $5::text[]) AS u(id, msg_id)
            WHERE EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = u.msg_id)
            ON CONFLICT DO NOTHING
            RETURNING tenant_id, status, msg_id
         ), counted AS (
            SELECT tenant_id, status, CASE WHEN msg_id = $13 THEN $12::bigint ELSE 0 END AS bytes FROM ins
         ), {}
         SELECT 1",
        usage::bump("usage", "counted", usage::ATTEMPTS)
    );
    db.execute(
        &sql,
        &[
            &tenant.as_str(),
            &h.app_id.as_str(),
            &h.endpoint_id.as_str(),
            &ids,
            &a.msg_ids,
            &a.url,
            &(if a.success { 0i16 } else { 2i16 }),
            &a.status_code,
            &a.response,
            &a.duration_ms,
            &a.request_headers,
            &a.bytes,
            &a.msg_ids.first().cloned().unwrap_or_default(),
        ],
    )
    .await?;
    // Failing since its first failure after a success; a success ends it.
    db.execute(
        "UPDATE endpoints SET
            failing_since = CASE WHEN $4 THEN NULL ELSE COALESCE(failing_since, now()) END,
            last_success_at = CASE WHEN $4 THEN now() ELSE last_success_at END
         WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
        &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str(), &a.success],
    )
    .await?;
    Ok(true)
}
