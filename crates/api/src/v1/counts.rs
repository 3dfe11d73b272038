//! Svix's tenant-wide counts and the environment's settings: `count-active`,
//! `stats/endpoint/count`, `environment/settings`.

use actix_web::{get, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    store::{counts, portals, tenants},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(count_active).service(endpoint_count).service(settings);
}

/// Svix's filters here; Hookgate has no Svix Play endpoints and counts only
/// enabled endpoints as active, so both are accepted and change nothing.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct CountQuery {
    exclude_svix_play: Option<bool>,
    exclude_disabled: Option<bool>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ActiveAppCount)]
struct ActiveAppCount {
    count: i64,
}

/// Applications with at least one enabled endpoint.
#[utoipa::path(params(CountQuery), tag = "Statistics", operation_id = "v1.application.count-active", responses((status = 200, body = ActiveAppCount)))]
#[get("/app/stats/count-active")]
async fn count_active(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    _q: web::Query<CountQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(HttpResponse::Ok().json(ActiveAppCount { count: counts::active_apps(&**conn, &tenant.0).await? }))
}

#[derive(Serialize, ToSchema)]
#[schema(as = EndpointCountOut)]
struct EndpointCountOut {
    active: i64,
    disabled: i64,
}

/// The tenant's endpoints, enabled and disabled.
#[utoipa::path(params(CountQuery), tag = "Statistics", operation_id = "v1.statistics.endpoint-count", responses((status = 200, body = EndpointCountOut)))]
#[get("/stats/endpoint/count")]
async fn endpoint_count(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    _q: web::Query<CountQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let (active, disabled) = counts::endpoints(&**conn, &tenant.0).await?;
    Ok(HttpResponse::Ok().json(EndpointCountOut { active, disabled }))
}

/// The settings Svix's portal reads, from the tenant's portal settings
/// (`/api/v1/settings/portal`): its name, logo and colour, and the features
/// Hookgate's portal shows.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvironmentSettingsOut)]
struct SettingsOut {
    display_name: Option<String>,
    logo_url: Option<String>,
    custom_color: Option<String>,
    enable_channels: bool,
    enable_message_tags: bool,
    enable_transformations: bool,
    enable_integration_management: bool,
    enable_message_stream: bool,
    enable_endpoint_oauth_config: bool,
    enable_endpoint_mtls_config: bool,
    show_svix_brand_footer: bool,
    show_use_svix_play: bool,
    wipe_successful_payload: bool,
}

#[utoipa::path(tag = "Environment", operation_id = "v1.environment.get-settings", responses((status = 200, body = SettingsOut)))]
#[get("/environment/settings")]
async fn settings(tenant: TenantAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let s = portals::get(&**conn, &tenant.0).await?;
    let t = tenants::get(&**conn, &tenant.0).await?.ok_or(ApiError::NotFound("tenant"))?;
    Ok(HttpResponse::Ok().json(SettingsOut {
        display_name: s.display_name,
        logo_url: s.logo_url,
        custom_color: s.primary_color,
        enable_channels: true,
        enable_message_tags: true,
        enable_transformations: t.transformations && !t.transformations_off,
        enable_integration_management: true,
        enable_message_stream: false,
        enable_endpoint_oauth_config: false,
        enable_endpoint_mtls_config: false,
        show_svix_brand_footer: false,
        show_use_svix_play: false,
        wipe_successful_payload: false,
    }))
}
