//! `/healthz` (the process lives), `/readyz` (Postgres reachable, Redis reported), `/metrics`.

use actix_web::{get, web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;

/// The process's liveness.
#[derive(Serialize, ToSchema)]
pub struct Alive {
    /// Always `ok`.
    status: &'static str,
}

/// Readiness: Postgres and Redis as this process sees them.
#[derive(Serialize, ToSchema)]
pub struct Ready {
    /// `up` or `down`.
    postgres: &'static str,
    /// As this process sees Redis.
    redis: hookgate_shared::redis::RedisState,
    /// The switch migration still to apply, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<String>,
}

/// The process lives.
#[utoipa::path(tag = "Health", operation_id = "hookgate.healthz", security(()), responses((status = 200, body = Alive)))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Alive { status: "ok" })
}

/// Ready means Postgres answers now, with every switch migration applied; Redis
/// is reported but never makes us unready, since every decision falls back to
/// Postgres without it.
/// Bounded by `HOOKGATE_DB_TIMEOUT_MS` alone, to answer within a probe's timeout.
#[utoipa::path(
    tag = "Health",
    operation_id = "hookgate.readyz",
    security(()),
    responses((status = 200, body = Ready), (status = 503, body = Ready, description = "Postgres unreachable, or a switch migration not applied"))
)]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let (pg, redis) = tokio::join!(hookgate_shared::db::ping(&state.db, state.config.db_timeout), state.redis.state());
    let mut body = Ready { postgres: if pg.is_ok() { "up" } else { "down" }, redis, schema: None };
    match pg {
        Ok(None) => HttpResponse::Ok().json(body),
        Ok(Some(switch)) => {
            body.schema = Some(format!("migration {switch} is not applied: run `hookgate migrate --switch`"));
            HttpResponse::ServiceUnavailable().json(body)
        }
        Err(e) => {
            tracing::warn!(error = %e, "not ready: postgres unreachable");
            HttpResponse::ServiceUnavailable().json(body)
        }
    }
}

#[get("/metrics")]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state.metrics.observe_pools(&state.pools());
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(state.metrics.render())
}

/// `GET /api/v1/health`, Svix's unauthenticated health check: 204.
#[utoipa::path(tag = "Health", operation_id = "v1.health.get", security(()), responses((status = 204, description = "healthy")))]
#[get("/api/v1/health")]
pub async fn api_health() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

/// `GET /api/v1/health/ping`, which Svix's server answers and its own tests call
/// (not in its OpenAPI document): 204, like the health check.
#[utoipa::path(tag = "Health", operation_id = "hookgate.health.ping", security(()), responses((status = 204, description = "healthy")))]
#[get("/api/v1/health/ping")]
pub async fn api_ping() -> HttpResponse {
    HttpResponse::NoContent().finish()
}
