//! Endpoint queues: the fair claim. Each endpoint's waiting deliveries are a
//! queue (`deliveries_queue`: tenant, application, endpoint, due time); a worker
//! lists the endpoints with deliveries waiting, round robin from where its last
//! claim left off, and claims from each only as many as that endpoint may start
//! now. What an endpoint cannot take now (over its share, held by its throttle)
//! is not read, claimed or rewritten, so one endpoint's backlog costs the others
//! one index probe per claim, however long it is.

use std::time::Duration;

use super::{
    deliveries::{claimed_from_row, Claimed, CLAIMED_ROWS},
    StoreError,
};
use crate::ids::{AppId, EndpointId, TenantId};

/// Most deliveries one claim takes: the worker's batch is at most this, and the
/// claim states it as a bound the planner can see.
pub const MOST_PER_CLAIM: usize = 500;

/// One endpoint's queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Queue {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
}

/// A listed queue with something due, and whether a `throttleRate` (its
/// endpoint's or its application's) spaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub queue: Queue,
    pub throttled: bool,
}

/// Of up to `limit` endpoints with deliveries waiting (in index order after
/// `after`, from the first if `None`, and not past `upto`), those with a delivery
/// due now, and the last endpoint looked at. A loose index scan: two probes per
/// endpoint (is there one, is one due), whatever its backlog; an endpoint whose
/// deliveries are all in flight or retried later is looked at but not listed,
/// so it takes no room from a claim.
pub async fn list(
    db: &deadpool_postgres::Client,
    after: Option<&Queue>,
    upto: Option<&Queue>,
    limit: i64,
) -> Result<(Vec<Listed>, Option<Queue>, i64), StoreError> {
    // The empty string sorts first in every collation: "from the first".
    let key = |q: Option<&Queue>| match q {
        Some(q) => {
            (Some(q.tenant_id.as_str().to_owned()), q.app_id.as_str().to_owned(), q.endpoint_id.as_str().to_owned())
        }
        None => (None, String::new(), String::new()),
    };
    let (at, aa, ae) = key(after);
    let (ut, ua, ue) = key(upto);
    let statement = db
        .prepare_cached(
            "WITH RECURSIVE q(t, a, e, n) AS (
                (SELECT tenant_id, app_id, endpoint_id, 1 FROM deliveries
                 WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL
                   AND (tenant_id, app_id, endpoint_id) > (COALESCE($1, ''), $2, $3)
                 ORDER BY tenant_id, app_id, endpoint_id LIMIT 1)
                UNION ALL
                SELECT x.tenant_id, x.app_id, x.endpoint_id, q.n + 1 FROM q CROSS JOIN LATERAL (
                    SELECT tenant_id, app_id, endpoint_id FROM deliveries
                    WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL
                      AND (tenant_id, app_id, endpoint_id) > (q.t, q.a, q.e)
                    ORDER BY tenant_id, app_id, endpoint_id LIMIT 1) x
                -- Stop at the limit, and one probe past the bound at most.
                WHERE q.n < $7::bigint AND ($4::text IS NULL OR (q.t, q.a, q.e) < ($4, $5, $6))
             )
             SELECT q.t, q.a, q.e,
                 EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = q.t AND d.app_id = q.a
                     AND d.endpoint_id = q.e AND d.status IN (1, 3) AND d.next_attempt_at <= now()) AS due,
                 (ep.throttle_rate IS NOT NULL OR ap.throttle_rate IS NOT NULL) AS throttled
             FROM q
             LEFT JOIN endpoints ep ON ep.tenant_id = q.t AND ep.app_id = q.a AND ep.id = q.e
             LEFT JOIN applications ap ON ap.tenant_id = q.t AND ap.id = q.a
             WHERE $4::text IS NULL OR (q.t, q.a, q.e) <= ($4, $5, $6)
             ORDER BY q.n",
        )
        .await?;
    let rows = db.query(&statement, &[&at, &aa, &ae, &ut, &ua, &ue, &limit]).await?;
    let looked = rows.len() as i64;
    let queue = |r: &tokio_postgres::Row| Queue {
        tenant_id: TenantId::from_db(r.get(0)),
        app_id: AppId::from_db(r.get(1)),
        endpoint_id: EndpointId::from_db(r.get(2)),
    };
    let last = rows.last().map(queue);
    let due =
        rows.iter().filter(|r| r.get::<_, bool>(3)).map(|r| Listed { queue: queue(r), throttled: r.get(4) }).collect();
    Ok((due, last, looked))
}

/// Claims, for each queue, up to its count of its due deliveries, oldest due
/// first, under a lease and a fresh fencing token. A disabled or deleted tenant's
/// due deliveries are paused instead (pending, no due time, until resumed).
///
/// The rows are updated by the `ctid` they were locked at (the lock, taken in the
/// same statement, keeps it): the per-queue `LIMIT` is a column, which the planner
/// cannot estimate, and joining on the key made it hash the whole table.
pub async fn claim(
    db: &deadpool_postgres::Client,
    wants: &[(Queue, i64)],
    lease: Duration,
) -> Result<Vec<Claimed>, StoreError> {
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let token: i64 = rand::random();
    let col = |f: fn(&Queue) -> &str| wants.iter().map(|(q, _)| f(q).to_owned()).collect::<Vec<String>>();
    let rooms: Vec<i64> = wants.iter().map(|(_, n)| *n).collect();
    let sql = format!(
        "WITH want AS (
            -- A throttled endpoint (or application) is asked for one: its throttle
            -- lets one through per slot, and more would only be written back.
            SELECT w.t, w.a, w.e, CASE WHEN ep.throttle_rate IS NULL AND ap.throttle_rate IS NULL
                    THEN w.room ELSE LEAST(w.room, 1) END AS room
            FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS w(t, a, e, room)
            LEFT JOIN endpoints ep ON ep.tenant_id = w.t AND ep.app_id = w.a AND ep.id = w.e
            LEFT JOIN applications ap ON ap.tenant_id = w.t AND ap.id = w.a
         ), due AS (
            SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at, d.tableoid, d.ctid,
                (tn.disabled OR tn.deleted_at IS NOT NULL) AS paused
            FROM want w CROSS JOIN LATERAL (
                SELECT tenant_id, app_id, msg_id, endpoint_id, next_attempt_at, tableoid, ctid FROM deliveries d
                WHERE d.tenant_id = w.t AND d.app_id = w.a AND d.endpoint_id = w.e AND d.status IN (1, 3)
                  AND d.next_attempt_at <= now()
                ORDER BY d.next_attempt_at LIMIT w.room FOR UPDATE SKIP LOCKED) d
            JOIN tenants tn ON tn.id = d.tenant_id
            -- A bound the planner can see (the worker's batch is at most this).
            LIMIT {MOST_PER_CLAIM}
         ), paused AS (
            UPDATE deliveries d SET status = 1, next_attempt_at = NULL, lease_token = NULL
            FROM due
            WHERE due.paused AND d.tableoid = due.tableoid AND d.ctid = due.ctid AND d.tenant_id = due.tenant_id AND d.app_id = due.app_id
              AND d.msg_id = due.msg_id AND d.endpoint_id = due.endpoint_id
         ), claimed AS (
            UPDATE deliveries d SET status = 3, next_attempt_at = now() + make_interval(secs => $5),
                lease_token = $6
            FROM due
            WHERE NOT due.paused AND d.tableoid = due.tableoid AND d.ctid = due.ctid AND d.tenant_id = due.tenant_id AND d.app_id = due.app_id
              AND d.msg_id = due.msg_id AND d.endpoint_id = due.endpoint_id
            RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.attempts, d.trigger,
                due.next_attempt_at AS due_at
         )
         {CLAIMED_ROWS}"
    );
    let statement = db.prepare_cached(&sql).await?;
    let rows = db
        .query(
            &statement,
            &[
                &col(|q| q.tenant_id.as_str()),
                &col(|q| q.app_id.as_str()),
                &col(|q| q.endpoint_id.as_str()),
                &rooms,
                &lease.as_secs_f64(),
                &token,
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| claimed_from_row(r, token)).collect())
}
