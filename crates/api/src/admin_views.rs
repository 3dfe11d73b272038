//! The operator's read views for the console: a tenant's last day, its keys.

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, TenantId},
    store::{api_keys, volume},
    AppState,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{admin::find, Operator};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(stats).service(list_keys);
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

/// One of a tenant's API keys: never the key itself.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApiKeyOut)]
struct KeyOut {
    created_at: DateTime<Utc>,
    id: String,
    revoked_at: Option<DateTime<Utc>>,
}

/// A tenant's API keys, newest first (revoked ones too, marked).
#[derive(Serialize, ToSchema)]
#[schema(as = ApiKeyListOut)]
struct KeysOut {
    data: Vec<KeyOut>,
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
    let conn = db::conn(&state.db).await?;
    let v = volume::since(&**conn, &tenant.id, since).await?;
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

/// The tenant's API keys, ids and dates only: a key is shown once, when it is issued.
#[utoipa::path(tag = "Admin", operation_id = "admin.api-key.list", responses((status = 200, body = KeysOut)))]
#[get("/tenant/{tenant_id}/api-key")]
async fn list_keys(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    let keys = api_keys::list(&**conn, &tenant.id).await?;
    let data = keys
        .into_iter()
        .map(|k| KeyOut { id: k.id.to_string(), created_at: k.created_at, revoked_at: k.revoked_at })
        .collect();
    Ok(HttpResponse::Ok().json(KeysOut { data }))
}
