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
const LOGGED: &str = "l.xid::text, l.seq, m.id, m.event_id, m.event_type, m.channels, m.tags, m.payload,
    COALESCE(m.content_type, 'application/json'), m.created_at, l.created_at";

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

/// The message id of a queue destination's oldest delivery not yet ended
/// (pending, or waiting for a retry), or of its newest that succeeded.
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
                  AND status IN (1, 3) ORDER BY msg_id LIMIT 1"
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
    /// Past this log position (of the unkeyed order).
    Position(Position),
    /// Past this message, on its key.
    Message(&'a MessageId),
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
}

/// Moves a FIFO endpoint's position forward (never back) past `to`: the
/// messages before it are not sent. A batch being retried is dropped (the next
/// turn forms one from the new position) and the row is due now, unless parked.
/// Refused while a runner holds a row: its result would write the old position
/// back over the skip, and the batch in flight is already on its way.
pub async fn fifo_skip(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    to: SkipTo<'_>,
) -> Result<Skipped, StoreError> {
    let held = tx
        .query_one(
            // In key order, as a publish locks a keyed endpoint's rows (see `fifo::wake`).
            "SELECT count(*) FILTER (WHERE lease_token IS NOT NULL AND lease_until > now()) FROM (
                SELECT lease_token, lease_until FROM fifo_state
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                ORDER BY key FOR UPDATE) s",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str()],
        )
        .await?;
    if held.get::<_, i64>(0) > 0 {
        return Ok(Skipped::Sending);
    }
    // (key, position) targets: one per key for `All`, else the one row named.
    // $4 and $5 are named in every form (each parameter needs its type).
    let (target, p4, p5) = match to {
        SkipTo::All => (
            "SELECT s.key, t.xid, t.seq FROM fifo_state s
             CROSS JOIN LATERAL (SELECT l.xid, l.seq FROM sink_log l
                WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                  AND l.key = s.key AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY l.xid DESC, l.seq DESC LIMIT 1) t
             WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3
               AND $4::text IS NULL AND $5::text IS NULL",
            None,
            None,
        ),
        SkipTo::Position(p) => {
            ("SELECT ''::text, $4::text::xid8, $5::text::bigint", Some(p.xid.to_string()), Some(p.seq.to_string()))
        }
        // Looked for after each key's position only: what is still waiting.
        SkipTo::Message(m) => (
            "SELECT l.key, l.xid, l.seq FROM fifo_state s
             JOIN sink_log l ON l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id
                AND l.key = s.key AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq)
             WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3 AND l.msg_id = $4
               AND $5::text IS NULL
             LIMIT 1",
            Some(m.to_string()),
            None,
        ),
    };
    let sql = format!(
        "WITH target(key, xid, seq) AS ({target}),
         moved AS (
            UPDATE fifo_state s SET pos_xid = t.xid, pos_seq = t.seq, batch_xid = NULL, batch_seq = NULL,
                tries = 0, lease_token = NULL, lease_until = NULL,
                next_at = CASE WHEN s.parked THEN s.next_at ELSE now() END
            FROM target t
            WHERE s.tenant_id = $1 AND s.app_id = $2 AND s.endpoint_id = $3 AND s.key = t.key
              AND (s.pos_xid, s.pos_seq) < (t.xid, t.seq)
            RETURNING 1)
         SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM moved)"
    );
    let row = tx.query_one(&sql, &[&tenant.as_str(), &app.as_str(), &ep.as_str(), &p4, &p5]).await?;
    let (targets, moved): (i64, i64) = (row.get(0), row.get(1));
    Ok(match (&to, targets) {
        (SkipTo::Message(_), 0) => Skipped::NotWaiting,
        _ => Skipped::Moved(moved as u64),
    })
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
            "SELECT count(*), min(next_attempt_at) FROM (
                SELECT next_attempt_at FROM deliveries
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND status IN (1, 3)
                  AND next_attempt_at IS NOT NULL AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $4) due",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str(), &most],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}
