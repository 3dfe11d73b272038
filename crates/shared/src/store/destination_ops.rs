//! A destination's progress as Svix's destination API reads and moves it: the
//! oldest message not yet acknowledged, the last one acknowledged, skipping
//! ahead and retrying now, for FIFO endpoints (a position in the sinks' log per
//! order key) and for queue destinations (a delivery per message).

use tokio_postgres::GenericClient;

use super::{
    sinks::{self, Logged, Position},
    wakes, StoreError,
};
use crate::ids::{AppId, EndpointId, MessageId, TenantId};

/// The columns [`sinks::logged`] reads, from a log row `l` and its message `m`.
const LOGGED: &str = "l.xid::text AS xid, l.seq, m.id, m.event_id, m.event_type, m.channels, m.tags, m.payload,
    COALESCE(m.content_type, 'application/json') AS content_type, m.created_at, l.created_at AS logged_at";

/// A FIFO endpoint's next message: of every key's next log row (below the
/// horizon, its message still kept), the first in log order; what its runner
/// sends next (for a keyed endpoint, the one waiting longest).
pub async fn fifo_next(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<Option<Logged>, StoreError> {
    let sql = format!(
        "SELECT {LOGGED} FROM fifo_state s
         CROSS JOIN LATERAL (
            SELECT l.* FROM sink_log l
            WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
              AND l.key = s.key AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq)
              AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
              AND EXISTS (SELECT 1 FROM messages m
                  WHERE m.tenant_id = l.tenant_id AND m.app_id = l.app_id AND m.id = l.msg_id)
            ORDER BY l.xid, l.seq LIMIT 1) l
         JOIN messages m ON m.tenant_id = l.tenant_id AND m.app_id = l.app_id AND m.id = l.msg_id
         WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3
         ORDER BY l.xid, l.seq LIMIT 1"
    );
    let row = db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str()]).await?;
    Ok(row.as_ref().map(sinks::logged))
}

/// A FIFO endpoint's last acknowledged message: the log row at each key's
/// position, the last in log order (`None` before its first, or once that row
/// or its message was pruned).
pub async fn fifo_last_acked(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<Option<Logged>, StoreError> {
    let sql = format!(
        "SELECT {LOGGED} FROM fifo_state s
         JOIN sink_log l ON l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
             AND l.key = s.key AND l.xid = s.pos_xid AND l.seq = s.pos_seq
         JOIN messages m ON m.tenant_id = l.tenant_id AND m.app_id = l.app_id AND m.id = l.msg_id
         WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3
         ORDER BY l.xid DESC, l.seq DESC LIMIT 1"
    );
    let row = db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str()]).await?;
    Ok(row.as_ref().map(sinks::logged))
}

/// The message id of a queue destination's next delivery (pending, or waiting
/// for a retry: the one due first, as its worker claims them), or of its newest
/// that succeeded. The next is read through the partial index `deliveries_queue`
/// (its predicate repeated here: `next_attempt_at IS NOT NULL`), one index probe;
/// deliveries paused (a disabled tenant's, no due time) are not next.
pub async fn queue_message(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    acked: bool,
) -> Result<Option<MessageId>, StoreError> {
    let sql = match acked {
        true => {
            "SELECT msg_id FROM deliveries WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                 AND status = 0 ORDER BY msg_id DESC LIMIT 1"
        }
        false => {
            "SELECT msg_id FROM deliveries WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                  AND status IN (1, 3) AND next_attempt_at IS NOT NULL ORDER BY next_attempt_at LIMIT 1"
        }
    };
    let row = db.query_opt(sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str()]).await?;
    Ok(row.map(|r| MessageId::from_db(r.get(0))))
}

/// Where a skip moves a FIFO endpoint.
#[derive(Debug, Clone)]
pub enum SkipTo<'a> {
    /// Past everything logged (below the horizon), on every key.
    All,
    /// Past this log position (of the unkeyed order): a row of the endpoint's log.
    Position(Position),
    /// Past this message, on its key. `fifo_key` is the endpoint's key path
    /// (`None` when it is not keyed): the message's key is read from its payload.
    Message(&'a MessageId, Option<&'a [String]>),
}

/// What a skip did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Moved (or already past): how many progress rows moved.
    Moved(u64),
    /// A batch is being sent now (a runner holds a row): nothing moved.
    Sending,
    /// The message is not waiting on this endpoint (never logged for it, or
    /// already sent or skipped).
    NotWaiting,
    /// The message was logged by a transaction newer than one still running:
    /// a row of that one could still land before it, so it cannot be passed yet.
    TooNew,
    /// No row of this endpoint's log is at that position (or it is above the
    /// horizon): it was never given out by this server for this endpoint.
    NoSuchPosition,
}

/// Moves a FIFO endpoint's position forward (never back) past `to`: the
/// messages before it are not sent. A batch being retried is dropped (the next
/// turn forms one from the new position) and the row is due now, unless parked.
/// Refused while a runner holds a row: its result would write the old position
/// back over the skip, and the batch in flight is already on its way.
///
/// The target is found first, without locks (a message by its key, walking
/// that key's log after its position: what still waits; a position by the log's
/// key); then only the rows to move are locked (every key for `All`, in key
/// order, as a publish locks a keyed endpoint's rows), and the update moves only
/// those, fenced to rows no runner holds: a row made or claimed since the lock
/// (a publish of a new key, a runner's claim) is never written.
pub async fn fifo_skip(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    to: SkipTo<'_>,
) -> Result<Skipped, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    // One key and where to move it, or every key (`All`).
    let one: Option<(String, Position)> = match to {
        SkipTo::All => None,
        SkipTo::Position(p) => {
            // The primary key's point: a row of this endpoint's unkeyed log, below the horizon.
            let found = tx
                .query_opt(
                    "SELECT 1 FROM sink_log
                     WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = ''
                       AND xid = $4::text::xid8 AND seq = $5
                       AND xid < pg_snapshot_xmin(pg_current_snapshot())",
                    &[&t, &a, &e, &p.xid.to_string(), &p.seq],
                )
                .await?;
            if found.is_none() {
                return Ok(Skipped::NoSuchPosition);
            }
            Some((String::new(), p))
        }
        SkipTo::Message(m, fifo_key) => {
            // Its key (as the fan-out made it), then its row among that key's rows
            // after the key's position: a walk of the primary key over what waits.
            let row = tx
                .query_opt(
                    "SELECT l.key, l.xid::text AS xid, l.seq, l.xid < pg_snapshot_xmin(pg_current_snapshot()) AS settled
                     FROM messages m
                     JOIN fifo_state s ON s.tenant_id = m.tenant_id AND s.app_id = m.app_id AND s.endpoint_id = $3
                        AND s.key = CASE WHEN $5::text[] IS NULL THEN '' ELSE hookgate_fifo_key(m.payload, $5) END
                     CROSS JOIN LATERAL (SELECT l.key, l.xid, l.seq FROM sink_log l
                        WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                          AND l.key = s.key AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq) AND l.msg_id = m.id
                        ORDER BY l.xid, l.seq LIMIT 1) l
                     WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = $4",
                    &[&t, &a, &e, &m.as_str(), &fifo_key],
                )
                .await?;
            let Some(row) = row else { return Ok(Skipped::NotWaiting) };
            if !row.get::<_, bool>("settled") {
                return Ok(Skipped::TooNew);
            }
            let at = Position { xid: row.get::<_, String>("xid").parse().unwrap_or(0), seq: row.get("seq") };
            Some((row.get("key"), at))
        }
    };
    // The rows to move, locked; none may be held by a runner.
    let keys: Vec<String> = one.iter().map(|(k, _)| k.clone()).collect();
    let locked = tx
        .query(
            "SELECT key, lease_token IS NOT NULL AND lease_until > now() AS held FROM fifo_state
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND ($4::text[] IS NULL OR key = ANY ($4))
             ORDER BY key FOR UPDATE",
            &[&t, &a, &e, &one.as_ref().map(|_| keys)],
        )
        .await?;
    if locked.iter().any(|r| r.get::<_, bool>("held")) {
        return Ok(Skipped::Sending);
    }
    let locked: Vec<String> = locked.iter().map(|r| r.get("key")).collect();
    // (key, position) targets of the locked keys: one per key for `All`, else the one found.
    let (target, p5, p6) = match &one {
        None => (
            "SELECT s.key, t.xid, t.seq FROM fifo_state s
             CROSS JOIN LATERAL (SELECT l.xid, l.seq FROM sink_log l
                WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                  AND l.key = s.key AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY l.xid DESC, l.seq DESC LIMIT 1) t
             WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3 AND s.key = ANY ($4)
               AND $5::text IS NULL AND $6::text IS NULL",
            None,
            None,
        ),
        Some((_, p)) => (
            "SELECT k, $5::text::xid8, $6::text::bigint FROM unnest($4::text[]) k",
            Some(p.xid.to_string()),
            Some(p.seq.to_string()),
        ),
    };
    let sql = format!(
        "WITH target(key, xid, seq) AS ({target})
         UPDATE fifo_state s SET pos_xid = t.xid, pos_seq = t.seq, batch_xid = NULL, batch_seq = NULL,
             tries = 0, lease_token = NULL, lease_until = NULL,
             next_at = CASE WHEN s.parked THEN s.next_at ELSE now() END
         FROM target t
         WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3 AND s.key = t.key
           AND (s.pos_xid, s.pos_seq) < (t.xid, t.seq)
           AND (s.lease_token IS NULL OR s.lease_until <= now())"
    );
    let moved = tx.execute(&sql, &[&t, &a, &e, &locked, &p5, &p6]).await?;
    Ok(Skipped::Moved(moved))
}

/// Makes a FIFO endpoint's rows that wait for a retry due now (not one held
/// by a runner, nor one parked: its endpoint or tenant is shut); how many.
pub async fn fifo_retry_now(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "UPDATE fifo_state SET next_at = now()
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND tries > 0
               AND lease_token IS NULL AND NOT parked AND next_at > now() AND next_at < 'infinity'",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str()],
        )
        .await?)
}

/// Makes a queue destination's deliveries that wait for a retry (or for its
/// throttle) due now, lowering its wake; how many. Paused ones (a disabled
/// tenant's, `next_attempt_at` null) and those in flight stay as they are.
pub async fn queue_retry_now(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<u64, StoreError> {
    let sql = format!(
        "WITH forced AS (
            UPDATE deliveries d SET next_attempt_at = now()
            WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.endpoint_id = $3 AND d.status IN (1, 3)
              AND d.next_attempt_at > now() AND (d.leased_until IS NULL OR d.leased_until <= now())
            RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at
         ), {}
         SELECT count(*) FROM forced",
        wakes::lower("forced")
    );
    let row = db.query_one(&sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str()]).await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// An endpoint's deliveries held back now: how many are due (up to `most`),
/// and since when the oldest of them has been due.
pub async fn due_backlog(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    most: i64,
) -> Result<(i64, Option<chrono::DateTime<chrono::Utc>>), StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) AS n, min(next_attempt_at) AS oldest FROM (
                SELECT next_attempt_at FROM deliveries
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND status IN (1, 3)
                  AND next_attempt_at IS NOT NULL AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $4) due",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str(), &most],
        )
        .await?;
    Ok((row.get("n"), row.get("oldest")))
}
