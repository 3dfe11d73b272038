//! `/healthz` (the process lives), `/readyz` (Postgres reachable, Redis reported), `/metrics`.

use actix_web::{get, web, HttpResponse};
use hookgate_shared::store;
use serde_json::json;

use crate::AppState;

#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Ready means Postgres answers now, with every switch migration applied; Redis
/// is reported but never makes us unready, since every decision falls back to
/// Postgres without it.
/// Bounded by `HOOKGATE_DB_TIMEOUT_MS` alone, to answer within a probe's timeout.
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let (pg, redis) = tokio::join!(store::health::ping(&state.db, state.config.db_timeout), state.redis.state());
    let mut body = json!({
        "postgres": if pg.is_ok() { "up" } else { "down" },
        "redis": redis,
    });
    match pg {
        Ok(None) => HttpResponse::Ok().json(body),
        Ok(Some(switch)) => {
            body["schema"] = json!(format!("migration {switch} is not applied: run `hookgate migrate --switch`"));
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

/// `GET /openapi.json`: Hookgate's own routes (admin, sources, inbound events, `/in`).
/// The Svix-compatible routes are described by Svix's own OpenAPI document.
#[get("/openapi.json")]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(include_str!("openapi.json"))
}

/// `GET /api/v1/health`, Svix's unauthenticated health check: 204.
#[get("/api/v1/health")]
pub async fn api_health() -> HttpResponse {
    HttpResponse::NoContent().finish()
}
