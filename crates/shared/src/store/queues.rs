//! Endpoint queues: the claim. Each endpoint's waiting deliveries are a queue
//! (`deliveries_queue`: tenant, application, endpoint, due time). A worker claims
//! from the endpoints whose wake has come (`store::wakes::due`), and from the
//! deliveries a commit has just made due, by key (`Hint`), as many as each
//! endpoint may start now; one statement per tenant. What an endpoint cannot
//! take now is not read, claimed or rewritten.

use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

pub use super::wakes::Queue;
use super::{
    deliveries::{claimed_from_row, claimed_rows, Claimed},
    StoreError,
};
use crate::ids::{AppId, EndpointId, MessageId, TenantId};

/// Most deliveries one claim takes: the worker's batch is at most this, and the
/// claim states it as a bound the planner can see.
pub const MOST_PER_CLAIM: usize = 500;

/// Deliveries of one endpoint that a commit has just made due: its messages
/// from `lo` to `hi` (ids sort by time, so a commit's are one narrow range).
/// Told to the workers after the commit, so they claim by key, in the one
/// partition the range lies in, without looking for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    pub queue: Queue,
    pub lo: MessageId,
    pub hi: MessageId,
}

/// What a claim asks of one endpoint of the tenant: up to `room` deliveries,
/// and, for a hinted claim, only among the messages from `lo` to `hi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
    pub room: i64,
    pub range: Option<(MessageId, MessageId)>,
}

/// Of up to `limit` endpoints with deliveries waiting (in index order after
/// `after`, from the first if `None`), those with a delivery due now, and the
/// last endpoint looked at. A loose index scan of `deliveries_queue`: two probes
/// per endpoint and partition, whatever its backlog. Not on the claim path: the
/// worker's slow sweep, a safety net that wakes endpoints whose deliveries are
/// due without a wake.
///
/// Deliberately across tenants (a sweep of the whole table, in bounded steps).
pub async fn list(
    db: &deadpool_postgres::Client,
    after: Option<&Queue>,
    limit: i64,
) -> Result<(Vec<Queue>, Option<Queue>), StoreError> {
    // The empty string sorts first in every collation: "from the first".
    let (at, aa, ae) = match after {
        Some(q) => (q.tenant_id.as_str(), q.app_id.as_str(), q.endpoint_id.as_str()),
        None => ("", "", ""),
    };
    let statement = db
        .prepare_cached(
            // cross-tenant: the sweep of endpoints with deliveries waiting
            "WITH RECURSIVE q(t, a, e, n) AS (
                (SELECT tenant_id, app_id, endpoint_id, 1 FROM deliveries
                 WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL
                   AND (tenant_id, app_id, endpoint_id) > ($1, $2, $3)
                 ORDER BY tenant_id, app_id, endpoint_id LIMIT 1)
                UNION ALL
                SELECT x.tenant_id, x.app_id, x.endpoint_id, q.n + 1 FROM q CROSS JOIN LATERAL (
                    SELECT tenant_id, app_id, endpoint_id FROM deliveries
                    WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL
                      AND (tenant_id, app_id, endpoint_id) > (q.t, q.a, q.e)
                    ORDER BY tenant_id, app_id, endpoint_id LIMIT 1) x
                WHERE q.n < $4::bigint
             )
             SELECT q.t AS tenant_id, q.a AS app_id, q.e AS endpoint_id,
                 EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = q.t AND d.app_id = q.a
                     AND d.endpoint_id = q.e AND d.status IN (1, 3) AND d.next_attempt_at <= now()
                     AND (d.leased_until IS NULL OR d.leased_until <= now())) AS due
             FROM q ORDER BY q.n",
        )
        .await?;
    let rows = db.query(&statement, &[&at, &aa, &ae, &limit]).await?;
    let queue = |r: &tokio_postgres::Row| Queue {
        tenant_id: TenantId::from_db(r.get("tenant_id")),
        app_id: AppId::from_db(r.get("app_id")),
        endpoint_id: EndpointId::from_db(r.get("endpoint_id")),
    };
    let last = if rows.len() as i64 == limit { rows.last().map(queue) } else { None };
    Ok((rows.iter().filter(|r| r.get::<_, bool>("due")).map(queue).collect(), last))
}

/// Not in flight: never leased, or its lease has run out (its worker died or
/// stalled; the fencing token keeps that worker's late result out).
const UNLEASED: &str = "AND (d.leased_until IS NULL OR d.leased_until <= now())";

/// The statement's head: the wanted endpoints with their room (a throttled one,
/// its endpoint's or application's `throttleRate`, asked for one: its throttle
/// lets one through per slot, and more would only be written back).
const WANT: &str = "want AS (
        SELECT w.a, w.e, w.lo, w.hi, CASE WHEN ep.throttle_rate IS NULL AND ap.throttle_rate IS NULL
                THEN w.room ELSE LEAST(w.room, 1) END AS room
        FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[]) AS w(a, e, room, lo, hi)
        LEFT JOIN endpoints ep ON ep.tenant_id = $1 AND ep.app_id = w.a AND ep.id = w.e
        LEFT JOIN applications ap ON ap.tenant_id = $1 AND ap.id = w.a
     )";

/// The statement's tail: the rows of `due` paused (a disabled or deleted tenant:
/// pending with no due time, until resumed) or claimed under a lease and a fresh
/// fencing token, written to `leased_until` and `lease_token` alone: no indexed
/// column changes, so the claim is a HOT update where the page has room (the
/// partitions keep 30 % of each page free for it, migration 0027); the rows updated by the `ctid` they were locked at (the lock,
/// taken in the same statement, keeps it: the per-endpoint `LIMIT` is a column,
/// which the planner cannot estimate, and joining on the key made it hash the
/// whole table: the key is joined to the locked rows, never to a parameter, so
/// the plan stays a lookup by `ctid`).
///
/// `bounds` narrows the update to the partitions a hinted claim's range lies in
/// (`$9`, `$10`): a generic plan prunes by scalar parameters when it starts, so the
/// other partitions are not even opened (a join by `ctid` alone opens them all).
fn take(pause: bool, bounds: &str) -> String {
    let paused = if pause {
        "paused AS (
            UPDATE deliveries d SET status = 1, next_attempt_at = NULL, lease_token = NULL, leased_until = NULL
            FROM due
            WHERE due.paused AND d.tableoid = due.tableoid AND d.ctid = due.ctid AND d.tenant_id = due.tenant_id
              AND d.app_id = due.app_id AND d.msg_id = due.msg_id AND d.endpoint_id = due.endpoint_id
         ),"
    } else {
        ""
    };
    format!(
        "{paused} claimed AS (
            UPDATE deliveries d SET leased_until = now() + make_interval(secs => $7), lease_token = $8
            FROM due
            WHERE NOT due.paused AND d.tableoid = due.tableoid AND d.ctid = due.ctid AND d.tenant_id = due.tenant_id
              AND d.app_id = due.app_id AND d.msg_id = due.msg_id AND d.endpoint_id = due.endpoint_id {bounds}
            RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.attempts, d.trigger,
                due.next_attempt_at AS due_at
         )"
    )
}

/// A claim's lease: how long, and a moment no later than the `now()` it counts from.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    pub length: Duration,
    pub began: Instant,
}

impl Lease {
    /// A lease taken now (for a claim made outside [`claim_all`]).
    pub fn from_now(length: Duration) -> Self {
        Lease { length, began: Instant::now() }
    }

    /// No later than the lease's end as Postgres counts it.
    pub fn ends(&self) -> Instant {
        self.began + self.length
    }
}

/// Claims, for each wanted endpoint of the tenant, up to its room of its due
/// deliveries, oldest due first (a hinted want: lowest message id first, among
/// its range), under a lease and a fresh fencing token. A disabled or deleted
/// tenant's due deliveries are paused instead. Endpoints whose wake had come and
/// that gave something are woken last (`wake_at = now()`): the listing goes round
/// them least lately served first.
///
/// Hinted and due wants go in separate statements: a hinted one names the range
/// of message ids it may touch (`$9`, `$10`), so Postgres reads only the
/// partitions that range lies in.
pub async fn claim(
    db: &impl GenericClient,
    tenant: &TenantId,
    wants: &[Want],
    lease: Lease,
) -> Result<Vec<Claimed>, StoreError> {
    let (hinted, due): (Vec<&Want>, Vec<&Want>) = wants.iter().partition(|w| w.range.is_some());
    let mut claimed = claim_some(db, tenant, &due, lease).await?;
    claimed.extend(claim_some(db, tenant, &hinted, lease).await?);
    Ok(claimed)
}

/// One claim of a worker: each tenant's wants in a statement of its own (pipelined,
/// in tenant order), all in one transaction whose commit does not wait for the
/// disk: a claim lost in a crash leaves its rows due, to be claimed again.
///
/// The claim's plans are made (once per connection, `db::Plans::Generic`) with
/// hash and merge joins off, as on every connection of that pool: estimating a few
/// hundred locked rows, Postgres otherwise hashes the whole of a tenant's partition
/// to update them by `ctid` (11 ms for 90 rows of 20,000), where a lookup per row
/// takes microseconds.
pub async fn claim_all(
    db: &mut deadpool_postgres::Client,
    by_tenant: &std::collections::BTreeMap<TenantId, Vec<Want>>,
    lease: Duration,
) -> Result<Vec<Claimed>, StoreError> {
    // Before the transaction begins, so before the `now()` its leases count from.
    let lease = Lease { length: lease, began: Instant::now() };
    let tx = db.transaction().await?;
    tx.batch_execute("SET LOCAL synchronous_commit = off").await?;
    let parts =
        futures_util::future::try_join_all(by_tenant.iter().map(|(tenant, wants)| claim(&tx, tenant, wants, lease)))
            .await?;
    tx.commit().await?;
    Ok(parts.into_iter().flatten().collect())
}

async fn claim_some(
    db: &impl GenericClient,
    tenant: &TenantId,
    wants: &[&Want],
    lease: Lease,
) -> Result<Vec<Claimed>, StoreError> {
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let hinted = wants[0].range.is_some();
    let token: i64 = rand::random();
    let lo = wants.iter().filter_map(|w| w.range.as_ref().map(|r| r.0.as_str())).min().unwrap_or_default();
    let hi = wants.iter().filter_map(|w| w.range.as_ref().map(|r| r.1.as_str())).max().unwrap_or_default();
    let range = |f: fn(&(MessageId, MessageId)) -> &MessageId| {
        wants.iter().map(|w| w.range.as_ref().map(|r| f(r).to_string())).collect::<Vec<Option<String>>>()
    };
    let sql = if hinted {
        format!(
            "WITH {WANT}, due AS (
                SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at, d.tableoid, d.ctid,
                    (tn.disabled OR tn.deleted_at IS NOT NULL) AS paused
                FROM want w CROSS JOIN LATERAL (
                    SELECT tenant_id, app_id, msg_id, endpoint_id, next_attempt_at, tableoid, ctid FROM deliveries d
                    WHERE d.tenant_id = $1 AND d.app_id = w.a AND d.endpoint_id = w.e
                      AND d.msg_id BETWEEN w.lo AND w.hi AND d.msg_id BETWEEN $9 AND $10
                      AND d.status = 1 AND d.next_attempt_at <= now() {UNLEASED}
                    ORDER BY d.msg_id LIMIT w.room FOR UPDATE SKIP LOCKED) d
                -- A disabled or deleted tenant's are left to the due claim, which pauses them.
                JOIN tenants tn ON tn.id = $1 AND NOT tn.disabled AND tn.deleted_at IS NULL
                LIMIT {MOST_PER_CLAIM}
             ), {take}
             {rows}",
            take = take(false, "AND d.msg_id BETWEEN $9 AND $10"),
            rows = claimed_rows("AND m.id BETWEEN $9 AND $10"),
        )
    } else {
        format!(
            "WITH {WANT}, due AS (
                SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at, d.tableoid, d.ctid,
                    (tn.disabled OR tn.deleted_at IS NOT NULL) AS paused
                FROM want w CROSS JOIN LATERAL (
                    SELECT tenant_id, app_id, msg_id, endpoint_id, next_attempt_at, tableoid, ctid FROM deliveries d
                    WHERE d.tenant_id = $1 AND d.app_id = w.a AND d.endpoint_id = w.e AND d.status IN (1, 3)
                      AND d.next_attempt_at <= now() {UNLEASED}
                    ORDER BY d.next_attempt_at LIMIT w.room FOR UPDATE SKIP LOCKED) d
                JOIN tenants tn ON tn.id = $1
                -- A bound the planner can see (the worker's batch is at most this).
                LIMIT {MOST_PER_CLAIM}
             ), {take}, rotate AS (
                -- Best effort, never waiting (so never in a lock cycle): a wake
                -- held by another statement keeps its place this time.
                SELECT q.app_id, q.endpoint_id FROM endpoint_wakes q
                JOIN (SELECT DISTINCT app_id, endpoint_id FROM claimed) s
                    ON q.tenant_id = $1 AND q.app_id = s.app_id AND q.endpoint_id = s.endpoint_id
                WHERE q.wake_at < now()
                ORDER BY q.app_id, q.endpoint_id
                FOR NO KEY UPDATE OF q SKIP LOCKED
             ), rotated AS (
                UPDATE endpoint_wakes q SET wake_at = now() FROM rotate r
                WHERE q.tenant_id = $1 AND q.app_id = r.app_id AND q.endpoint_id = r.endpoint_id
             )
             {rows}",
            take = take(true, ""),
            rows = claimed_rows(""),
        )
    };
    let statement = db.prepare_cached(&sql).await?;
    let (apps, eps): (Vec<String>, Vec<String>) =
        wants.iter().map(|w| (w.app_id.to_string(), w.endpoint_id.to_string())).unzip();
    let rooms: Vec<i64> = wants.iter().map(|w| w.room).collect();
    let (los, his) = (range(|r| &r.0), range(|r| &r.1));
    let secs = lease.length.as_secs_f64();
    let tenant_id = tenant.as_str();
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
        vec![&tenant_id, &apps, &eps, &rooms, &los, &his, &secs, &token];
    if hinted {
        params.extend([&lo as &(dyn tokio_postgres::types::ToSql + Sync), &hi]);
    }
    let rows = db.query(&statement, &params).await?;
    Ok(rows.iter().map(|r| Claimed { by_hint: hinted, ..claimed_from_row(r, token, lease.ends()) }).collect())
}

/// Renews a claim's lease from now, while its fencing token is still the row's
/// (a claim whose time before sending ran long: its attempt then gets its whole
/// timeout, rather than being cut or put off). Returns the renewed lease, or
/// `None` when the token is gone (a resend, or a lease that ran out and was
/// claimed again): the claim no longer owns the delivery and must not send it.
pub async fn extend_lease(
    db: &impl GenericClient,
    tenant: &TenantId,
    c: &super::deliveries::Claimed,
    length: Duration,
) -> Result<Option<Lease>, StoreError> {
    let statement = db
        .prepare_cached(
            "UPDATE deliveries SET leased_until = now() + make_interval(secs => $6)
             WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND endpoint_id = $4 AND lease_token = $5",
        )
        .await?;
    let lease = Lease::from_now(length);
    let n = db
        .execute(
            &statement,
            &[
                &tenant.as_str(),
                &c.app_id.as_str(),
                &c.msg_id.as_str(),
                &c.endpoint_id.as_str(),
                &c.lease,
                &length.as_secs_f64(),
            ],
        )
        .await?;
    Ok((n == 1).then_some(lease))
}
