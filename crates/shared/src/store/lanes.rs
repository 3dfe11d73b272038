//! Endpoint lanes (`delivery_lanes`): an endpoint's due deliveries parked out of
//! the shared due order while it cannot take them, served round robin.
//!
//! A parked delivery is pending with no due time (`next_attempt_at` NULL, as a
//! paused tenant's are) and has a lane row, written in the same statement; the
//! shared claim never sees it, so a backlog of one endpoint costs the others
//! nothing. Serving a lane deletes its rows and claims their deliveries under a
//! lease in one statement: a worker that dies after it leaves sending rows whose
//! lease brings them back, as any claim's.

use std::time::Duration;

use tokio_postgres::GenericClient;

use super::{
    deliveries::{claimed_from_row, Claimed, CLAIMED_ROWS},
    StoreError,
};
use crate::ids::{AppId, EndpointId, TenantId};

/// One endpoint's lane.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
}

/// How deep into the shared due order parking looks: what stands further back
/// is not in anyone's way yet, and is parked when the claim reaches it.
const HEAD: i64 = 10_000;

/// Parks up to `limit` of the endpoint's deliveries found among the first
/// [`HEAD`] of the shared due order, each keeping its due time in the lane;
/// returns how many.
///
/// Two statements, so that the second names the messages: the first reads the
/// due index's head only (never the endpoint's history); the second locks those
/// rows (skipping any a claim or a resend holds) by key with the message ids
/// listed, so only their partitions are touched, and moves them in one
/// statement with their lane rows.
pub async fn park_due(
    db: &deadpool_postgres::Client,
    tenant: &TenantId,
    lane: &Lane,
    limit: i64,
) -> Result<u64, StoreError> {
    let head = db
        .prepare_cached(
            // The LIMIT keeps the endpoint's conditions out of the inner scan.
            "SELECT msg_id FROM (
                SELECT tenant_id, app_id, msg_id, endpoint_id, status FROM deliveries
                WHERE status IN (1, 3) AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $5) head
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND status = 1
             LIMIT $4",
        )
        .await?;
    let (t, a, e) = (tenant.as_str(), lane.app_id.as_str(), lane.endpoint_id.as_str());
    let msgs: Vec<String> = db.query(&head, &[&t, &a, &e, &limit, &HEAD]).await?.iter().map(|r| r.get(0)).collect();
    if msgs.is_empty() {
        return Ok(0);
    }
    let row = db
        .query_one(
            "WITH picked AS (
                SELECT tenant_id, app_id, msg_id, endpoint_id, next_attempt_at FROM deliveries
                WHERE msg_id = ANY ($4) AND tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                  AND status = 1 AND next_attempt_at <= now()
                FOR UPDATE SKIP LOCKED
             ), moved AS (
                UPDATE deliveries d SET next_attempt_at = NULL
                FROM picked p
                WHERE d.msg_id = ANY ($4) AND d.tenant_id = p.tenant_id AND d.app_id = p.app_id
                  AND d.msg_id = p.msg_id AND d.endpoint_id = p.endpoint_id
                RETURNING d.tenant_id, d.app_id, d.endpoint_id, d.msg_id, p.next_attempt_at AS due_at
             ), laned AS (
                INSERT INTO delivery_lanes (tenant_id, app_id, endpoint_id, msg_id, due_at)
                SELECT tenant_id, app_id, endpoint_id, msg_id, due_at FROM moved
                ON CONFLICT (tenant_id, app_id, endpoint_id, msg_id) DO UPDATE SET due_at = EXCLUDED.due_at
             )
             SELECT count(*) FROM moved",
            &[&t, &a, &e, &msgs],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Up to `limit` lanes that hold deliveries, in key order from `after` (a loose
/// index scan: one probe per lane, however long the lanes are).
pub async fn list(db: &impl GenericClient, after: Option<&Lane>, limit: i64) -> Result<Vec<Lane>, StoreError> {
    let (t, a, e) = match after {
        Some(l) => (l.tenant_id.as_str(), l.app_id.as_str(), l.endpoint_id.as_str()),
        None => ("", "", ""),
    };
    let rows = db
        .query(
            "WITH RECURSIVE l AS (
                (SELECT tenant_id, app_id, endpoint_id FROM delivery_lanes
                 WHERE (tenant_id, app_id, endpoint_id) > ($1, $2, $3)
                 ORDER BY tenant_id, app_id, endpoint_id LIMIT 1)
                UNION ALL
                SELECT n.tenant_id, n.app_id, n.endpoint_id FROM l, LATERAL (
                    SELECT tenant_id, app_id, endpoint_id FROM delivery_lanes d
                    WHERE (d.tenant_id, d.app_id, d.endpoint_id) > (l.tenant_id, l.app_id, l.endpoint_id)
                    ORDER BY tenant_id, app_id, endpoint_id LIMIT 1) n
             )
             SELECT tenant_id, app_id, endpoint_id FROM l LIMIT $4",
            &[&t, &a, &e, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Lane {
            tenant_id: TenantId::from_db(r.get(0)),
            app_id: AppId::from_db(r.get(1)),
            endpoint_id: EndpointId::from_db(r.get(2)),
        })
        .collect())
}

/// Takes up to `limit` of the lane's oldest rows and claims their deliveries for
/// `lease` under a fresh fencing token, as [`super::deliveries::claim`] does. A
/// row whose delivery has moved on is dropped; a paused tenant's delivery stays
/// paused (its tenant's resumption makes it due again).
pub async fn serve(
    db: &deadpool_postgres::Client,
    tenant: &TenantId,
    lane: &Lane,
    limit: i64,
    lease: Duration,
) -> Result<Vec<Claimed>, StoreError> {
    let token: i64 = rand::random();
    let sql = format!(
        "WITH taken AS (
            DELETE FROM delivery_lanes l USING (
                SELECT tenant_id, app_id, endpoint_id, due_at, msg_id FROM delivery_lanes
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                ORDER BY due_at, msg_id LIMIT $4 FOR UPDATE SKIP LOCKED) o
            WHERE l.tenant_id = o.tenant_id AND l.app_id = o.app_id AND l.endpoint_id = o.endpoint_id
              AND l.msg_id = o.msg_id
            RETURNING l.tenant_id, l.app_id, l.endpoint_id, l.due_at, l.msg_id
         ), due AS (
            SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, taken.due_at
            FROM taken
            JOIN deliveries d ON d.tenant_id = taken.tenant_id AND d.app_id = taken.app_id
                AND d.msg_id = taken.msg_id AND d.endpoint_id = taken.endpoint_id
            JOIN tenants t ON t.id = d.tenant_id
            WHERE d.status = 1 AND d.next_attempt_at IS NULL AND NOT t.disabled AND t.deleted_at IS NULL
            FOR UPDATE OF d
         ), claimed AS (
            UPDATE deliveries d SET status = 3, next_attempt_at = now() + make_interval(secs => $5),
                lease_token = $6
            FROM due
            WHERE d.tenant_id = due.tenant_id AND d.app_id = due.app_id AND d.msg_id = due.msg_id
              AND d.endpoint_id = due.endpoint_id
            RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.attempts, d.trigger, due.due_at
         )
         {CLAIMED_ROWS}"
    );
    // Prepared once per connection, as the claim is (its plan spans every partition).
    let statement = db.prepare_cached(&sql).await?;
    let rows = db
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &lane.app_id.as_str(),
                &lane.endpoint_id.as_str(),
                &limit,
                &lease.as_secs_f64(),
                &token,
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| claimed_from_row(r, token)).collect())
}
