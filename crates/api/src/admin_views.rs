//! The operator's read views for the console: a tenant's last day, the fleet's health.

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, TenantId},
    redis::RedisState,
    store::{fleet, volume},
    AppState,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{admin_tenant::find, Operator};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(stats).service(fleet_health);
}

/// A tenant's last 24 hours both ways, and its delivery backlog now (fields in
/// the order the answer always had: by name).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = TenantStatsOut)]
struct StatsOut {
    attempts: i64,
    /// Copies of inbound events caught as duplicates.
    duplicates: i64,
    failed_attempts: i64,
    /// `failedAttempts / attempts`, 0 without attempts.
    failure_rate: f64,
    inbound_events: i64,
    messages: i64,
    /// When the oldest pending delivery was created.
    oldest_pending: Option<DateTime<Utc>>,
    /// Deliveries waiting to be sent (pending or being sent).
    pending_deliveries: i64,
    since: DateTime<Utc>,
}

/// The tenant's last 24 hours both ways, the failure rate of its attempts, and
/// its delivery backlog now.
#[utoipa::path(tag = "Admin", operation_id = "admin.tenant.stats", responses((status = 200, body = StatsOut)))]
#[get("/tenant/{tenant_id}/stats")]
async fn stats(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let since = Utc::now() - Duration::hours(24);
    let v = state.read(async |c| volume::since(c, &tenant.id, since).await).await?;
    let failure_rate = match v.attempts {
        0 => 0.0,
        n => v.failed_attempts as f64 / n as f64,
    };
    Ok(HttpResponse::Ok().json(StatsOut {
        since,
        messages: v.messages,
        inbound_events: v.inbound,
        duplicates: v.duplicates,
        attempts: v.attempts,
        failed_attempts: v.failed_attempts,
        failure_rate,
        pending_deliveries: v.pending,
        oldest_pending: v.oldest_pending,
    }))
}

/// Postgres as this process sees it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PostgresHealth {
    up: bool,
    /// How long the backlog's query took, in milliseconds.
    latency_ms: Option<u64>,
    /// Why it did not answer, when it did not.
    error: Option<String>,
    /// Connections of each pool of this process: open and idle.
    pools: Vec<PoolOut>,
}

#[derive(Serialize, ToSchema)]
struct PoolOut {
    name: &'static str,
    size: usize,
    idle: usize,
    max: usize,
}

/// The delivery backlog of every tenant.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct BacklogOut {
    /// Deliveries waiting for an attempt (a retry's time to come, or due) or in flight.
    waiting: i64,
    /// Of those, due now or in flight.
    due: i64,
    /// When the most overdue delivery was due.
    oldest_due: Option<DateTime<Utc>>,
}

/// A delivery worker that reported in the last minute.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct WorkerOut {
    name: String,
    /// How long work it could start waited for it, in milliseconds (0: keeping up).
    pressure_ms: i32,
    seen_at: DateTime<Utc>,
}

/// The fleet's health: Postgres and Redis as this process sees them, the
/// backlog across tenants, and the workers that reported lately.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FleetHealthOut)]
struct FleetOut {
    postgres: PostgresHealth,
    redis: RedisState,
    /// `null` when Postgres did not answer.
    backlog: Option<BacklogOut>,
    workers: Vec<WorkerOut>,
    at: DateTime<Utc>,
}

/// The fleet's health for the console: answers 200 whatever is down, saying what is.
#[utoipa::path(tag = "Admin", operation_id = "admin.health", responses((status = 200, body = FleetOut)))]
#[get("/health")]
async fn fleet_health(_: Operator, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let read = db::bounded(state.db_budget(), async {
        let started = std::time::Instant::now();
        let conn = db::conn(&state.db).await?;
        let backlog = fleet::backlog(&**conn).await?;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let workers = fleet::workers(&**conn).await?;
        Ok((backlog, workers, latency_ms))
    });
    let (read, redis) = tokio::join!(read, state.redis.state());
    let pools = state
        .pools()
        .into_iter()
        .map(|(name, p)| {
            let s = p.status();
            PoolOut { name, size: s.size, idle: s.available, max: s.max_size }
        })
        .collect();
    let (postgres, backlog, workers) = match read {
        Ok((b, w, latency_ms)) => (
            PostgresHealth { up: true, latency_ms: Some(latency_ms), error: None, pools },
            Some(BacklogOut { waiting: b.waiting, due: b.due, oldest_due: b.oldest_due }),
            w.into_iter().map(|w| WorkerOut { name: w.name, pressure_ms: w.pressure_ms, seen_at: w.seen_at }).collect(),
        ),
        Err(e) => (PostgresHealth { up: false, latency_ms: None, error: Some(e.to_string()), pools }, None, vec![]),
    };
    Ok(HttpResponse::Ok().json(FleetOut { postgres, redis, backlog, workers, at: Utc::now() }))
}
