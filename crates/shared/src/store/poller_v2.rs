//! Polling endpoint consumers of Svix's poller v2: a committed position, and
//! a lease on what the last polls handed out (see migration 0040). Stored
//! beside v1's consumers in `sink_consumers`, under names v1 cannot take.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{sinks::Position, StoreError};
use crate::ids::{AppId, EndpointId, TenantId};

/// The row name of a v2 consumer: `v2:` and its name (a v1 name is a uid, which has no `:`).
fn row_name(name: &str) -> String {
    format!("v2:{name}")
}

/// A v2 consumer as kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consumer {
    /// Acknowledged up to here.
    pub committed: Position,
    /// The last message handed out, and until when it and those before it are leased.
    pub leased: Option<(Position, DateTime<Utc>)>,
}

/// The consumer, if it has polled, its row locked until the caller's
/// transaction ends (a consumer's polls and commits take turns), and the
/// database's `now()`: leases are given and judged by the database's clock,
/// the same for every API process.
pub async fn consumer(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    name: &str,
) -> Result<Option<(Consumer, DateTime<Utc>)>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT pos_xid::text AS pos_xid, pos_seq, lease_xid::text AS lease_xid, lease_seq, lease_until,
                 now() AS db_now
             FROM sink_consumers
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND consumer = $4 FOR UPDATE",
            &[&tenant.as_str(), &app.as_str(), &sink.as_str(), &row_name(name)],
        )
        .await?;
    Ok(row.map(|r| {
        let at = |xid: Option<String>, seq: Option<i64>| Position {
            xid: xid.and_then(|x| x.parse().ok()).unwrap_or(0),
            seq: seq.unwrap_or(0),
        };
        let leased = match (
            r.get::<_, Option<String>>("lease_xid"),
            r.get::<_, Option<i64>>("lease_seq"),
            r.get::<_, Option<DateTime<Utc>>>("lease_until"),
        ) {
            (Some(xid), Some(seq), Some(until)) => Some((at(Some(xid), Some(seq)), until)),
            _ => None,
        };
        (Consumer { committed: at(r.get("pos_xid"), r.get("pos_seq")), leased }, r.get("db_now"))
    }))
}

/// Makes the consumer at `start` unless it exists: two first polls at once
/// both make it here (one waits for the other's row), then both lock it with
/// [`consumer`] and take turns, so they never hand out the same messages.
pub async fn create(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    name: &str,
    start: Position,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO sink_consumers (tenant_id, app_id, endpoint_id, consumer, pos_xid, pos_seq)
         VALUES ($1, $2, $3, $4, $5::text::xid8, $6)
         ON CONFLICT (tenant_id, app_id, endpoint_id, consumer) DO NOTHING",
        &[&tenant.as_str(), &app.as_str(), &sink.as_str(), &row_name(name), &start.xid.to_string(), &start.seq],
    )
    .await?;
    Ok(())
}

/// How far back a commit of an offset already committed is recognised: the
/// log rows at or before the committed position looked at, at most.
pub const LOOK_BACK: i64 = 1000;

/// Whether the message at `offset` is among the last [`LOOK_BACK`] log rows at
/// or before `committed` (a commit repeated, or one overtaken by a later one):
/// a bounded walk of the primary key back from the committed position.
pub async fn committed_already(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    committed: Position,
    offset: i64,
) -> Result<bool, StoreError> {
    let row = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM (
                SELECT seq FROM sink_log
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = ''
                  AND (xid, seq) <= ($4::text::xid8, $5::bigint)
                ORDER BY xid DESC, seq DESC LIMIT $7) back WHERE back.seq = $6)",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &sink.as_str(),
                &committed.xid.to_string(),
                &committed.seq,
                &offset,
                &LOOK_BACK,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// Keeps the consumer (made if new): its committed position, and its lease.
pub async fn save(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    name: &str,
    c: &Consumer,
) -> Result<(), StoreError> {
    let (lease_xid, lease_seq, until) = match c.leased {
        Some((p, until)) => (Some(p.xid.to_string()), Some(p.seq), Some(until)),
        None => (None, None, None),
    };
    tx.execute(
        "INSERT INTO sink_consumers (tenant_id, app_id, endpoint_id, consumer, pos_xid, pos_seq,
             lease_xid, lease_seq, lease_until)
         VALUES ($1, $2, $3, $4, $5::text::xid8, $6, $7::text::xid8, $8, $9)
         ON CONFLICT (tenant_id, app_id, endpoint_id, consumer)
         DO UPDATE SET pos_xid = EXCLUDED.pos_xid, pos_seq = EXCLUDED.pos_seq, lease_xid = EXCLUDED.lease_xid,
             lease_seq = EXCLUDED.lease_seq, lease_until = EXCLUDED.lease_until, updated_at = now()",
        &[
            &tenant.as_str(),
            &app.as_str(),
            &sink.as_str(),
            &row_name(name),
            &c.committed.xid.to_string(),
            &c.committed.seq,
            &lease_xid,
            &lease_seq,
            &until,
        ],
    )
    .await?;
    Ok(())
}

/// The log position of the message at `offset` (a log row's `seq`) among those
/// handed out after `after` up to `upto`: a bounded look, as only those may be
/// committed. `None` if no row there has that offset.
pub async fn handed_out(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    (after, upto): (Position, Position),
    offset: i64,
) -> Result<Option<Position>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT xid::text AS xid, seq FROM sink_log
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND key = ''
               AND (xid, seq) > ($4::text::xid8, $5::bigint) AND (xid, seq) <= ($6::text::xid8, $7::bigint)
               AND seq = $8",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &sink.as_str(),
                &after.xid.to_string(),
                &after.seq,
                &upto.xid.to_string(),
                &upto.seq,
                &offset,
            ],
        )
        .await?;
    Ok(row.map(|r| Position { xid: r.get::<_, String>("xid").parse().unwrap_or(0), seq: r.get("seq") }))
}
