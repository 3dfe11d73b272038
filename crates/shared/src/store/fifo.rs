//! A FIFO endpoint's progress (`fifo_state`): the runner that holds one (a lease
//! fenced by a token) reads its next batch from the sink's log, keeps the
//! batch's end so a retry resends the same batch, and moves on past it once it
//! succeeded or was given up. Every write after the pick is fenced by the token.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{
    sinks::{self, Position, Scanned},
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

/// The pick ([`pick`]): the due row whose turn came longest ago, of any tenant,
/// that no runner holds. Only due rows are walked (an index range on `next_at`):
/// a resting row's `next_at` is `infinity` and a held one's is its lease's end,
/// so neither costs a pick anything, however many there are. A due row whose
/// next log row is above the horizon (a transaction older than it still runs) is
/// passed over until it is not, as it cannot be read yet; a due row with nothing
/// past its position is taken, and its turn lays it to rest. Whether its
/// endpoint and tenant take what it has is the turn's to find out (one that is
/// shut is parked). `$1` the token, `$2` the lease in seconds. Public for the
/// test that reads its plan.
pub const PICK: &str = "WITH c AS (
        SELECT s.tenant_id, s.app_id, s.endpoint_id, s.key FROM fifo_state s
        WHERE s.next_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now())
          AND COALESCE((SELECT l.xid < pg_snapshot_xmin(pg_current_snapshot()) FROM sink_log l
                WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                  AND l.key = s.key AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq)
                ORDER BY l.xid, l.seq LIMIT 1), true)
        ORDER BY s.next_at LIMIT 1
        FOR UPDATE OF s SKIP LOCKED
     )
     UPDATE fifo_state s SET lease_until = now() + $2 * interval '1 second', lease_token = $1,
         -- Out of the due range while held; due again when the lease ends (its runner died).
         next_at = now() + $2 * interval '1 second'
     FROM c WHERE s.tenant_id = c.tenant_id AND s.app_id = c.app_id AND s.endpoint_id = c.endpoint_id
         AND s.key = c.key
     RETURNING s.tenant_id, s.app_id, s.endpoint_id, s.pos_xid::text AS pos_xid, s.pos_seq,
         s.batch_xid::text AS batch_xid, s.batch_seq, s.tries, s.key";

/// Holds the due FIFO row (an endpoint, or one key of it) of any tenant whose
/// turn came longest ago, for `lease_secs`; `None` if none is due.
pub async fn pick(db: &impl GenericClient, token: i64, lease_secs: f64) -> Result<Option<Held>, StoreError> {
    let row = db.query_opt(PICK, &[&token, &lease_secs]).await?;
    Ok(row.map(|r| {
        let batch_xid: Option<String> = r.get("batch_xid");
        let batch_seq: Option<i64> = r.get("batch_seq");
        Held {
            tenant_id: TenantId::from_db(r.get("tenant_id")),
            app_id: AppId::from_db(r.get("app_id")),
            endpoint_id: EndpointId::from_db(r.get("endpoint_id")),
            key: r.get("key"),
            token,
            pos: Position { xid: r.get::<_, String>("pos_xid").parse().unwrap_or(0), seq: r.get("pos_seq") },
            batch_end: batch_xid.zip(batch_seq).map(|(x, s)| Position { xid: x.parse().unwrap_or(0), seq: s }),
            tries: r.get("tries"),
        }
    }))
}

/// The held endpoint's batch: the one in flight, read to its kept end, or up to
/// `size` log rows past its position; with the last row looked at (rows whose
/// messages are gone are passed over with it). One snapshot: see [`sinks::scan`].
pub async fn batch(db: &impl GenericClient, tenant: &TenantId, h: &Held, size: i64) -> Result<Scanned, StoreError> {
    // A held batch is resent whole, up to its kept end, whatever `batchSize`
    // says now: lowered since it was cut, it would otherwise go shorter under the
    // same `webhook-id`.
    let (upto, limit) = match h.batch_end {
        Some(end) => (end, MOST_BATCH),
        None => (Position::LAST, size),
    };
    sinks::scan(db, tenant, &h.app_id, &h.endpoint_id, &h.key, h.pos, upto, limit).await
}

/// The largest `batchSize` a FIFO endpoint may have (the API's bound): no held
/// batch holds more.
pub const MOST_BATCH: i64 = 1000;

/// What [`renew`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// The batch's end is kept and the lease runs `lease_secs` from now: send.
    Held,
    /// Another runner holds the row now: send nothing.
    Lost,
    /// The endpoint is disabled, or its tenant disabled or deleted: send nothing
    /// (the turn parks the row).
    Shut,
}

/// Right before the batch is sent: keeps its end (so that its retries send the
/// same messages) and renews the lease for `lease_secs` from now, so the request
/// gets its whole time whatever the turn spent before it; only while the
/// endpoint is enabled and its tenant live and enabled, checked in the same
/// statement, so nothing goes out for a tenant deleted or disabled before it.
pub async fn renew(
    db: &impl GenericClient,
    tenant: &TenantId,
    h: &Held,
    end: Position,
    lease_secs: f64,
) -> Result<Renewed, StoreError> {
    let row = db
        .query_one(
            "WITH taking AS (
                SELECT 1 FROM endpoints e JOIN tenants t ON t.id = e.tenant_id
                WHERE e.tenant_id = $1 AND e.app_id = $2 AND e.id = $3
                  AND NOT e.disabled AND NOT t.disabled AND t.deleted_at IS NULL
             ), renewed AS (
                UPDATE fifo_state SET batch_xid = $5::text::xid8, batch_seq = $6,
                    lease_until = now() + $8 * interval '1 second', next_at = now() + $8 * interval '1 second'
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = $7 AND lease_token = $4
                  AND EXISTS (SELECT 1 FROM taking)
                RETURNING 1
             )
             SELECT EXISTS (SELECT 1 FROM renewed) AS renewed, EXISTS (SELECT 1 FROM taking) AS taking",
            &[
                &tenant.as_str(),
                &h.app_id.as_str(),
                &h.endpoint_id.as_str(),
                &h.token,
                &end.xid.to_string(),
                &end.seq,
                &h.key,
                &lease_secs,
            ],
        )
        .await?;
    Ok(match (row.get::<_, bool>("renewed"), row.get::<_, bool>("taking")) {
        (true, _) => Renewed::Held,
        (false, true) => Renewed::Lost,
        (false, false) => Renewed::Shut,
    })
}

/// What became of a batch.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Not sent yet (a batch still filling): due again at this time.
    Wait(DateTime<Utc>),
    /// Delivered, or given up: the position moves past it. `drained`: the turn
    /// saw nothing more, so the row rests (`next_at` infinity) unless the log
    /// holds more past it by the time the turn ends ([`end`] looks again).
    Past { end: Position, drained: bool },
    /// Failed, to be retried at `at`: the same batch, up to `end` (the last
    /// row of the batch, kept for the retries whatever the turn's `Held` said: on
    /// a first try it was cut in this very turn).
    Retry { at: DateTime<Utc>, end: Position },
    /// The endpoint is disabled or its tenant disabled or deleted: the row is
    /// parked as it is (position and any held batch kept) until the endpoint or
    /// tenant is enabled again ([`wake_endpoint`], [`wake_tenant`]).
    Parked,
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
///
/// A row that rests or is parked is not looked at again until something wakes
/// it, so neither decision may race with what would wake it. (`tx` must be a
/// transaction.)
/// - **Resting** (nothing more to send) races with a publish. The fan-out's
///   upsert locks the row even when it writes nothing, and judges it as last
///   committed. So the row is locked first, waiting out a publish holding it, and
///   the decision is taken by a later statement, whose snapshot sees what that
///   publish logged; a publish that comes later waits for this transaction, then
///   finds the row at rest (not parked) and wakes it.
/// - **Parking** (the endpoint or tenant shut) races with enabling them, which
///   wakes parked rows ([`wake_endpoint`], [`wake_tenant`]) after updating the
///   endpoint's or the tenant's row, in its transaction. So the tenant's row,
///   then the endpoint's, are locked (`FOR SHARE`) before the progress row, and
///   the decision is taken after: an enable that updated either first has
///   committed by then, and is seen; one that comes later waits for this
///   transaction, and its wake then finds the row parked. (Reading the tenant
///   without its lock, a park could see it disabled while its enable, whose wake
///   had passed over the row, not yet parked, was still to commit: the row stayed
///   parked for good.) Parks are rare: a row parked stays so until an enable.
pub async fn end(
    tx: &impl GenericClient,
    tenant: &TenantId,
    h: &Held,
    ended: &Ended,
    attempt: Option<&BatchAttempt>,
) -> Result<bool, StoreError> {
    if matches!(ended, Ended::Parked) {
        // In the order other transactions take them: the tenant's row (its
        // enable; an application's creation locks it too), then the endpoint's
        // (a destination's save), then progress rows (their wakes).
        tx.execute("SELECT 1 FROM tenants WHERE id = $1 FOR SHARE", &[&tenant.as_str()]).await?;
        tx.execute(
            "SELECT 1 FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR SHARE",
            &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str()],
        )
        .await?;
    }
    if attempt.is_some() {
        // The endpoint's row is written below (its failing state): locked
        // first, in the order a destination's save takes its locks (the
        // endpoint, then its progress rows: `wake_endpoint`), so the two never
        // wait for each other.
        tx.execute(
            "SELECT 1 FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR NO KEY UPDATE",
            &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str()],
        )
        .await?;
    }
    let held = tx
        .query_opt(
            "SELECT 1 FROM fifo_state
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = $4 AND lease_token = $5 FOR UPDATE",
            &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str(), &h.key, &h.token],
        )
        .await?;
    if held.is_none() {
        return Ok(false);
    }
    // (position, held batch, tries, next time when it neither rests nor parks, rests, parks)
    let (pos, batch, tries, at, rest, park) = match ended {
        Ended::Wait(at) => (h.pos, h.batch_end, h.tries, *at, false, false),
        Ended::Past { end, drained } => (*end, None, 0, Utc::now(), *drained, false),
        Ended::Retry { at, end } => (h.pos, Some(*end), h.tries + 1, *at, false, false),
        Ended::Parked => (h.pos, h.batch_end, h.tries, Utc::now(), false, true),
    };
    tx.execute(
        "WITH shut AS (
            SELECT $12 AND NOT EXISTS (
                SELECT 1 FROM endpoints e JOIN tenants t ON t.id = e.tenant_id
                WHERE e.tenant_id = $1 AND e.app_id = $2 AND e.id = $3
                  AND NOT e.disabled AND NOT t.disabled AND t.deleted_at IS NULL) AS parks
         )
         UPDATE fifo_state SET pos_xid = $5::text::xid8, pos_seq = $6, batch_xid = $7::text::xid8, batch_seq = $8,
            tries = $9, lease_until = NULL, lease_token = NULL, parked = shut.parks,
            next_at = CASE
                -- Parked while still shut; enabled meanwhile, due now.
                WHEN $12 THEN CASE WHEN shut.parks THEN 'infinity' ELSE now() END
                WHEN NOT $13 THEN $10
                -- Resting, unless more was logged by now (above the horizon too:
                -- the pick takes the row once it can be read).
                WHEN EXISTS (SELECT 1 FROM sink_log l
                    WHERE l.tenant_id = $1 AND l.app_id = $2 AND l.endpoint_id = $3 AND l.key = $11
                      AND (l.xid, l.seq) > ($5::text::xid8, $6::bigint)) THEN now()
                ELSE 'infinity' END
         FROM shut
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
            &at,
            &h.key,
            &park,
            &rest,
        ],
    )
    .await?;
    let Some(a) = attempt else { return Ok(true) };
    let ids: Vec<String> = a.msg_ids.iter().map(|_| AttemptId::generate().to_string()).collect();
    // One request for several messages: its ids are not each row's, so kept as
    // sent; the compact form stored once the contract allowing it has run.
    let compact = super::attempt_headers::compact_text(&a.request_headers, None);
    // One attempt per message of the batch, counted in the tenant's usage as any
    // attempt is (the request's bytes once, on its first message).
    let sql = format!(
        "WITH input AS (SELECT $2::text AS a), {}, ins AS (
            INSERT INTO attempts (tenant_id, app_id, id, msg_id, endpoint_id, url, status, trigger_type,
                response_status_code, response, response_duration_ms, request_headers)
            SELECT $1, $2, u.id, u.msg_id, $3, $6, $7, 0, $8, $9, $10,
                (CASE WHEN {} THEN $14::text ELSE $11::text END)::jsonb
            FROM unnest($4::text[], $5::text[]) AS u(id, msg_id)
            WHERE EXISTS (SELECT 1 FROM locked_apps) AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = u.msg_id)
            ON CONFLICT DO NOTHING
            RETURNING tenant_id, status, msg_id
         ), counted AS (
            SELECT tenant_id, status, CASE WHEN msg_id = $13 THEN $12::bigint ELSE 0 END AS bytes FROM ins
         ), {}
         SELECT 1",
        super::parents::lock_apps("$1", "input", "a"),
        super::attempt_headers::COMPACT,
        usage::bump("usage", "counted", usage::ATTEMPTS)
    );
    tx.execute(
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
            &compact,
        ],
    )
    .await?;
    // Failing since its first failure after a success; a success ends it.
    tx.execute(
        "UPDATE endpoints SET
            failing_since = CASE WHEN $4 THEN NULL ELSE COALESCE(failing_since, now()) END,
            last_success_at = CASE WHEN $4 THEN now() ELSE last_success_at END
         WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
        &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str(), &a.success],
    )
    .await?;
    Ok(true)
}

/// Which rows a wake takes: the parked ones (`parked`: at rest because a runner
/// found the endpoint or tenant shut). A row that rests because it had nothing
/// more to send needs no wake: a publish wakes it. Whether a runner about to park
/// a row misses the wake is the runner's concern: [`end`] takes the park decision
/// under the tenant's and the endpoint's row locks, which the enabling
/// transaction took before its wake.
///
/// The rows are locked in key order, the order in which a publish locks a keyed
/// endpoint's rows (`fanout::insert_deliveries`), so that a wake and a publish
/// cannot deadlock.
fn wake(scope: &str) -> String {
    format!(
        "UPDATE fifo_state s SET next_at = now(), parked = false
         FROM (SELECT tenant_id, app_id, endpoint_id, key FROM fifo_state
               WHERE {scope} AND parked
               ORDER BY tenant_id, app_id, endpoint_id, key
               FOR UPDATE) w
         WHERE s.tenant_id = w.tenant_id AND s.app_id = w.app_id AND s.endpoint_id = w.endpoint_id AND s.key = w.key"
    )
}

/// Wakes a FIFO endpoint's parked rows (in the transaction that enabled it,
/// after the change): it catches up on what was logged meanwhile. A row with
/// nothing to send rests after one turn.
pub async fn wake_endpoint(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<u64, StoreError> {
    let sql = wake("tenant_id = $1 AND app_id = $2 AND endpoint_id = $3");
    Ok(db.execute(&sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str()]).await?)
}

/// Wakes every parked FIFO row of a tenant enabled again (in the transaction
/// that enabled it, after the change).
pub async fn wake_tenant(db: &impl GenericClient, tenant: &TenantId) -> Result<u64, StoreError> {
    Ok(db.execute(&wake("tenant_id = $1"), &[&tenant.as_str()]).await?)
}

/// Whether the held endpoint takes what it has: enabled, its tenant live and
/// enabled. Read before a turn's batch, so that a shut endpoint's turn parks it
/// without reading its log; [`renew`] checks again right before the send.
pub async fn taking(db: &impl GenericClient, tenant: &TenantId, h: &Held) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM endpoints e JOIN tenants t ON t.id = e.tenant_id
                WHERE e.tenant_id = $1 AND e.app_id = $2 AND e.id = $3
                  AND NOT e.disabled AND NOT t.disabled AND t.deleted_at IS NULL)",
            &[&tenant.as_str(), &h.app_id.as_str(), &h.endpoint_id.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

/// Where a sweep ([`sweep`]) goes on from: a progress row's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
    pub key: String,
}

/// The workers' safety net: the next `limit` progress rows after `after` (from
/// the first without it), in key order round the table (the primary key's
/// range), of which those at rest with work waiting (a batch held, or log rows
/// past their position) whose endpoint is enabled and whose tenant is live and
/// enabled are woken. No path of this release leaves such a row: a process of
/// the previous release does, enabling an endpoint or a tenant without a wake
/// (a rolling upgrade), as might a fault not foreseen. Rows a runner or a publish
/// holds are passed over (the next round looks again). Returns how many rows
/// were woken, and where the next step goes on from (`None`: the walk reached
/// the end of the table). Spans tenants.
pub async fn sweep(
    db: &impl GenericClient,
    after: Option<&RowKey>,
    limit: i64,
) -> Result<(u64, Option<RowKey>), StoreError> {
    // The empty string sorts first in every collation: "from the first".
    let (t, a, e, k) = match after {
        Some(r) => (r.tenant_id.as_str(), r.app_id.as_str(), r.endpoint_id.as_str(), r.key.as_str()),
        None => ("", "", "", ""),
    };
    let row = db
        .query_one(
            // cross-tenant: the workers' slow sweep of FIFO rows left at rest with work waiting
            "WITH walked AS MATERIALIZED (
                SELECT tenant_id, app_id, endpoint_id, key, next_at, batch_xid, pos_xid, pos_seq FROM fifo_state
                WHERE (tenant_id, app_id, endpoint_id, key) > ($1, $2, $3, $4)
                ORDER BY tenant_id, app_id, endpoint_id, key LIMIT $5
             ), waiting AS MATERIALIZED (
                -- At rest with work waiting: one probe of the log's primary key each.
                SELECT w.tenant_id, w.app_id, w.endpoint_id, w.key FROM walked w
                WHERE w.next_at = 'infinity'
                  AND (w.batch_xid IS NOT NULL OR EXISTS (SELECT 1 FROM sink_log l
                      WHERE l.tenant_id = w.tenant_id AND l.app_id = w.app_id AND l.endpoint_id = w.endpoint_id
                        AND l.key = w.key AND (l.xid, l.seq) > (w.pos_xid, w.pos_seq)))
             ), stuck AS (
                -- Of an enabled endpoint of a live, enabled tenant (primary-key lookups).
                SELECT c.tenant_id, c.app_id, c.endpoint_id, c.key FROM waiting c
                WHERE EXISTS (SELECT 1 FROM endpoints e
                        WHERE e.tenant_id = c.tenant_id AND e.app_id = c.app_id AND e.id = c.endpoint_id
                          AND NOT e.disabled)
                  AND EXISTS (SELECT 1 FROM tenants t WHERE t.id = c.tenant_id AND NOT t.disabled AND t.deleted_at IS NULL)
             ), locked AS (
                SELECT s.tenant_id, s.app_id, s.endpoint_id, s.key FROM fifo_state s
                JOIN stuck c ON s.tenant_id = c.tenant_id AND s.app_id = c.app_id AND s.endpoint_id = c.endpoint_id
                    AND s.key = c.key
                WHERE s.next_at = 'infinity'
                ORDER BY s.tenant_id, s.app_id, s.endpoint_id, s.key
                FOR UPDATE OF s SKIP LOCKED
             ), woken AS (
                UPDATE fifo_state s SET next_at = now(), parked = false FROM locked c
                WHERE s.tenant_id = c.tenant_id AND s.app_id = c.app_id AND s.endpoint_id = c.endpoint_id
                  AND s.key = c.key
                RETURNING 1
             )
             SELECT (SELECT count(*) FROM woken) AS woken_n, (SELECT count(*) FROM walked) AS walked_n,
                 l.tenant_id, l.app_id, l.endpoint_id, l.key
             FROM (SELECT 1) one LEFT JOIN LATERAL (
                SELECT tenant_id, app_id, endpoint_id, key FROM walked
                ORDER BY tenant_id DESC, app_id DESC, endpoint_id DESC, key DESC LIMIT 1) l ON true",
            &[&t, &a, &e, &k, &limit],
        )
        .await?;
    let woken = row.get::<_, i64>("woken_n") as u64;
    let next = match row.get::<_, i64>("walked_n") == limit {
        true => row.get::<_, Option<String>>("tenant_id").map(|tenant| RowKey {
            tenant_id: TenantId::from_db(tenant),
            app_id: AppId::from_db(row.get("app_id")),
            endpoint_id: EndpointId::from_db(row.get("endpoint_id")),
            key: row.get("key"),
        }),
        false => None,
    };
    Ok((woken, next))
}
