//! The operator's read views for the console: a tenant's last day, its keys.

use actix_web::{get, web, HttpResponse};
use chrono::{Duration, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, TenantId},
    store::{api_keys, volume},
    AppState,
};
use serde_json::json;

use crate::{admin::find, Operator};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(stats).service(list_keys);
}

/// `GET /admin/v1/tenant/{id}/stats`: the last 24 hours both ways, the failure
/// rate of its attempts, and its delivery backlog now.
#[get("/tenant/{id}/stats")]
async fn stats(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let since = Utc::now() - Duration::hours(24);
    let conn = db::conn(&state.db).await?;
    let v = volume::since(&**conn, &tenant.id, since).await?;
    let failure_rate = match v.attempts {
        0 => 0.0,
        n => v.failed_attempts as f64 / n as f64,
    };
    Ok(HttpResponse::Ok().json(json!({
        "since": since,
        "messages": v.messages,
        "inboundEvents": v.inbound,
        "duplicates": v.duplicates,
        "attempts": v.attempts,
        "failedAttempts": v.failed_attempts,
        "failureRate": failure_rate,
        "pendingDeliveries": v.pending,
        "oldestPending": v.oldest_pending,
    })))
}

/// `GET /admin/v1/tenant/{id}/api-key`: ids and dates only; a key is shown once,
/// when it is issued.
#[get("/tenant/{id}/api-key")]
async fn list_keys(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    let keys = api_keys::list(&**conn, &tenant.id).await?;
    let data: Vec<_> = keys
        .into_iter()
        .map(|k| json!({ "id": k.id.to_string(), "createdAt": k.created_at, "revokedAt": k.revoked_at }))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "data": data })))
}
