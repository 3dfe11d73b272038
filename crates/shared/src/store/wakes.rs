//! Endpoint wakes: when each endpoint next needs a worker (`endpoint_wakes`).
//!
//! An endpoint's `wake_at` is never later than the earliest time one of its
//! waiting deliveries (pending, or in flight until its lease ends) falls due.
//! Workers list the endpoints whose wake has come, least lately woken first
//! ([`due`]): an endpoint waiting on a retry, or with everything in flight, is
//! not looked at until its time, so a claim's cost does not grow with endpoints
//! in backoff, and the listing reads one narrow unpartitioned index.
//!
//! The rule is kept by construction, with two moves:
//! - **lowering** ([`lower`]): every statement that makes a delivery due (creation,
//!   a retry written back, a resend) brings its endpoint's wake forward in the same
//!   statement, holding the wake row `FOR KEY SHARE` until it commits;
//! - **raising** ([`raise`]): a worker that found an endpoint drained locks its wake
//!   row `FOR UPDATE SKIP LOCKED` (so never while a statement that makes deliveries
//!   due holds it), then, in a new statement whose snapshot sees every such
//!   statement that committed, sets the wake to the earliest waiting delivery's
//!   time, or none. A statement that comes after the lock waits for it and sees
//!   the raised wake, which it lowers again. So no due delivery is ever left
//!   behind a later wake.
//!
//! A wake that is too early costs one look and is raised; a wake is never too late.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use super::StoreError;
use crate::ids::{AppId, EndpointId, TenantId};

/// One endpoint's queue: its deliveries waiting, and its wake. (Here, beside
/// the wakes, so that the claim's module depends on this one and not both ways.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Queue {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
}

/// CTEs that bring forward the wakes of the rows of the CTE `source`, which returns
/// `tenant_id, app_id, endpoint_id, next_attempt_at` of deliveries made due (rows
/// with no due time are left out). Appended to the `WITH` of every statement that
/// makes deliveries due; named after `source`, so a statement may hold several.
///
/// The wake rows are held `FOR KEY SHARE` until the statement's transaction ends:
/// a raise skips them. Whether to lower is read from the wake as locked (its
/// latest version, even one a raise committed after this statement began), not as
/// this statement's snapshot saw it, and the lowering takes the least of the
/// wake as it is when written and this statement's time: another statement may
/// have lowered it further meanwhile. Every lock is taken in key order (the
/// shared ones, then the rows to lower), so concurrent statements of this kind
/// cannot deadlock with each other.
pub(super) fn lower(source: &str) -> String {
    format!(
        "{source}_wake AS (
            SELECT tenant_id, app_id, endpoint_id, min(next_attempt_at) AS at FROM {source}
            WHERE next_attempt_at IS NOT NULL GROUP BY tenant_id, app_id, endpoint_id
         ), {source}_held AS (
            SELECT w.tenant_id, w.app_id, w.endpoint_id, w.at, q.wake_at
            FROM {source}_wake w JOIN endpoint_wakes q
                ON q.tenant_id = w.tenant_id AND q.app_id = w.app_id AND q.endpoint_id = w.endpoint_id
            ORDER BY w.tenant_id, w.app_id, w.endpoint_id
            FOR KEY SHARE OF q
         ), {source}_need AS (
            SELECT q.tenant_id, q.app_id, q.endpoint_id, h.at
            FROM {source}_held h JOIN endpoint_wakes q
                ON q.tenant_id = h.tenant_id AND q.app_id = h.app_id AND q.endpoint_id = h.endpoint_id
            WHERE h.wake_at IS NULL OR h.wake_at > h.at
            ORDER BY q.tenant_id, q.app_id, q.endpoint_id
            FOR NO KEY UPDATE OF q
         ), {source}_lowered AS (
            UPDATE endpoint_wakes q SET wake_at = LEAST(q.wake_at, n.at) FROM {source}_need n
            WHERE q.tenant_id = n.tenant_id AND q.app_id = n.app_id AND q.endpoint_id = n.endpoint_id
         ), {source}_woken AS (
            INSERT INTO endpoint_wakes (tenant_id, app_id, endpoint_id, wake_at)
            SELECT w.tenant_id, w.app_id, w.endpoint_id, w.at FROM {source}_wake w
            WHERE NOT EXISTS (SELECT 1 FROM {source}_held h
                WHERE h.tenant_id = w.tenant_id AND h.app_id = w.app_id AND h.endpoint_id = w.endpoint_id)
            ORDER BY w.tenant_id, w.app_id, w.endpoint_id
            ON CONFLICT (tenant_id, app_id, endpoint_id)
                DO UPDATE SET wake_at = LEAST(endpoint_wakes.wake_at, EXCLUDED.wake_at)
         )"
    )
}

/// Which `throttleRate` spaces an endpoint's deliveries, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttled {
    No,
    /// Its own (and not its application's).
    Endpoint,
    /// Its application's, shared by all the application's endpoints.
    App,
}

/// An endpoint whose wake has come, and which throttle spaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub queue: Queue,
    pub throttled: Throttled,
}

fn key(q: &Queue) -> String {
    format!("{} {} {}", q.tenant_id, q.app_id, q.endpoint_id)
}

/// Up to `limit` endpoints whose wake has come, least lately woken first, leaving
/// out the tenants and endpoints named (those with no room now, or waiting to be
/// raised); and how long until the next wake after now, if any, for the
/// worker's timer.
///
/// Deliberately across tenants: the one statement of the claim cycle that is (a
/// worker serves every tenant). It reads one narrow unpartitioned index.
pub async fn due(
    db: &deadpool_postgres::Client,
    skip_tenants: &HashSet<TenantId>,
    skip: &HashSet<Queue>,
    skip_apps: &HashSet<(TenantId, AppId)>,
    limit: i64,
) -> Result<(Vec<Listed>, Option<std::time::Duration>), StoreError> {
    let statement = db
        .prepare_cached(
            // cross-tenant: the listing of endpoints whose wake has come
            "WITH due AS (
                SELECT w.tenant_id, w.app_id, w.endpoint_id, w.wake_at FROM endpoint_wakes w
                WHERE w.wake_at <= now()
                  AND w.tenant_id NOT IN (SELECT unnest($1::text[]))
                  AND (w.tenant_id || ' ' || w.app_id || ' ' || w.endpoint_id) NOT IN (SELECT unnest($2::text[]))
                  AND (w.tenant_id || ' ' || w.app_id) NOT IN (SELECT unnest($4::text[]))
                ORDER BY w.wake_at LIMIT $3
             )
             SELECT d.tenant_id, d.app_id, d.endpoint_id,
                 CASE WHEN ap.throttle_rate IS NOT NULL THEN 2 WHEN ep.throttle_rate IS NOT NULL THEN 1 ELSE 0 END
                     AS throttled,
                 NULL::float8 AS next_wake_in
             FROM due d
             LEFT JOIN endpoints ep ON ep.tenant_id = d.tenant_id AND ep.app_id = d.app_id AND ep.id = d.endpoint_id
             LEFT JOIN applications ap ON ap.tenant_id = d.tenant_id AND ap.id = d.app_id
             UNION ALL
             -- How long until the next wake, by the database's clock (the worker's may differ).
             SELECT NULL, NULL, NULL, NULL::int,
                 (SELECT extract(epoch FROM min(wake_at) - now())::float8 FROM endpoint_wakes WHERE wake_at > now())",
        )
        .await?;
    let tenants: Vec<&str> = skip_tenants.iter().map(TenantId::as_str).collect();
    let queues: Vec<String> = skip.iter().map(key).collect();
    let apps: Vec<String> = skip_apps.iter().map(|(t, a)| format!("{t} {a}")).collect();
    let rows = db.query(&statement, &[&tenants, &queues, &limit, &apps]).await?;
    let mut listed = Vec::with_capacity(rows.len());
    let mut next = None;
    for r in &rows {
        match r.get::<_, Option<String>>("tenant_id") {
            Some(t) => listed.push(Listed {
                queue: Queue {
                    tenant_id: TenantId::from_db(t),
                    app_id: AppId::from_db(r.get("app_id")),
                    endpoint_id: EndpointId::from_db(r.get("endpoint_id")),
                },
                throttled: match r.get::<_, Option<i32>>("throttled") {
                    Some(2) => Throttled::App,
                    Some(1) => Throttled::Endpoint,
                    _ => Throttled::No,
                },
            }),
            None => {
                next = r.get::<_, Option<f64>>("next_wake_in").map(|s| std::time::Duration::from_secs_f64(s.max(0.0)))
            }
        }
    }
    Ok((listed, next))
}

/// Moves the wakes of the tenant's `endpoints`, which a worker found drained,
/// to the earliest time any of their waiting deliveries falls due (none: no
/// wake). An endpoint whose wake row a statement making deliveries due holds now
/// is skipped: it is about to be due anyway. Returns the endpoints raised, with
/// their new wakes.
///
/// One transaction of two statements: the lock, then the reading in a snapshot
/// taken after it (see the module's doc). Its commit need not wait for the disk:
/// a raise lost in a crash leaves a wake too early, which costs one look.
pub async fn raise(
    db: &mut deadpool_postgres::Client,
    tenant: &TenantId,
    endpoints: &[(AppId, EndpointId)],
) -> Result<Vec<((AppId, EndpointId), Option<DateTime<Utc>>)>, StoreError> {
    if endpoints.is_empty() {
        return Ok(Vec::new());
    }
    let mut sorted: Vec<&(AppId, EndpointId)> = endpoints.iter().collect();
    sorted.sort();
    let apps: Vec<&str> = sorted.iter().map(|(a, _)| a.as_str()).collect();
    let eps: Vec<&str> = sorted.iter().map(|(_, e)| e.as_str()).collect();
    let tx = db.transaction().await?;
    tx.batch_execute("SET LOCAL synchronous_commit = off").await?;
    let lock = tx
        .prepare_cached(
            "SELECT w.app_id, w.endpoint_id FROM endpoint_wakes w
             JOIN unnest($2::text[], $3::text[]) AS u(a, e) ON w.app_id = u.a AND w.endpoint_id = u.e
             WHERE w.tenant_id = $1
             ORDER BY w.app_id, w.endpoint_id
             FOR UPDATE OF w SKIP LOCKED",
        )
        .await?;
    let locked = tx.query(&lock, &[&tenant.as_str(), &apps, &eps]).await?;
    if locked.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let apps: Vec<String> = locked.iter().map(|r| r.get("app_id")).collect();
    let eps: Vec<String> = locked.iter().map(|r| r.get("endpoint_id")).collect();
    let set = tx
        .prepare_cached(
            "WITH next AS (
                -- The earliest of: the first due time of a delivery not leased (`f`, in
                -- the queue's order past those in flight), and the first end of a lease
                -- among the deliveries ahead of it (a lease behind it ends after its due
                -- time). Both read no more rows than are in flight, and neither reads the
                -- clock: a delivery claimed since this transaction began is still seen.
                SELECT u.a, u.e, LEAST(f.at,
                    (SELECT min(d.leased_until) FROM deliveries d
                     WHERE d.tenant_id = $1 AND d.app_id = u.a AND d.endpoint_id = u.e
                       AND d.status IN (1, 3) AND d.next_attempt_at IS NOT NULL
                       AND d.next_attempt_at < COALESCE(f.at, 'infinity') AND d.leased_until > d.next_attempt_at)
                 ) AS at,
                    EXISTS (SELECT 1 FROM endpoints e WHERE e.tenant_id = $1 AND e.app_id = u.a AND e.id = u.e) AS lives
                FROM unnest($2::text[], $3::text[]) AS u(a, e)
                LEFT JOIN LATERAL (
                    SELECT d.next_attempt_at AS at FROM deliveries d
                    WHERE d.tenant_id = $1 AND d.app_id = u.a AND d.endpoint_id = u.e
                      AND d.status IN (1, 3) AND d.next_attempt_at IS NOT NULL
                      AND (d.leased_until IS NULL OR d.leased_until <= d.next_attempt_at)
                    ORDER BY d.next_attempt_at LIMIT 1
                ) f ON true
             ), gone AS (
                -- Nothing waits and the endpoint is deleted: its wake goes too.
                DELETE FROM endpoint_wakes w USING next n
                WHERE w.tenant_id = $1 AND w.app_id = n.a AND w.endpoint_id = n.e AND n.at IS NULL AND NOT n.lives
             )
             UPDATE endpoint_wakes w SET wake_at = n.at FROM next n
             WHERE w.tenant_id = $1 AND w.app_id = n.a AND w.endpoint_id = n.e AND (n.at IS NOT NULL OR n.lives)
             RETURNING w.app_id, w.endpoint_id, w.wake_at",
        )
        .await?;
    let rows = tx.query(&set, &[&tenant.as_str(), &apps, &eps]).await?;
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|r| ((AppId::from_db(r.get("app_id")), EndpointId::from_db(r.get("endpoint_id"))), r.get("wake_at")))
        .collect())
}

/// Brings the wakes of the tenant's `endpoints` forward to now: for deliveries
/// due without a wake, found by the worker's sweep (a safety net: every statement
/// that makes a delivery due lowers its wake).
pub async fn wake_now(
    db: &deadpool_postgres::Client,
    tenant: &TenantId,
    endpoints: &[(AppId, EndpointId)],
) -> Result<u64, StoreError> {
    let apps: Vec<&str> = endpoints.iter().map(|(a, _)| a.as_str()).collect();
    let eps: Vec<&str> = endpoints.iter().map(|(_, e)| e.as_str()).collect();
    let statement = db
        .prepare_cached(&format!(
            "WITH found AS (
                SELECT $1::text AS tenant_id, a AS app_id, e AS endpoint_id, now() AS next_attempt_at
                FROM unnest($2::text[], $3::text[]) AS u(a, e)
             ), {}
             SELECT count(*) FROM found_wake",
            lower("found")
        ))
        .await?;
    let row = db.query_one(&statement, &[&tenant.as_str(), &apps, &eps]).await?;
    Ok(row.get::<_, i64>(0) as u64)
}
