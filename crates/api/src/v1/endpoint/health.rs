//! `GET …/app/{app}/endpoint-health` (Hookgate's): every HTTP endpoint's health
//! in one answer, for the portal's and console's first screens.

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    store::endpoint_health::{self, Health},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::applications::find as find_app;
use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(health);
}

/// What an endpoint's latest failed attempt answered.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct LastFailureOut {
    timestamp: DateTime<Utc>,
    /// 0 when no HTTP answer came (a connection refused, a timeout).
    response_status_code: i16,
    /// Its answer, or why none came; the first 500 characters.
    response: String,
}

/// One endpoint's health.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointHealthOut {
    endpoint_id: String,
    disabled: bool,
    /// The first failure since its last success; null while it succeeds.
    failing_since: Option<DateTime<Utc>>,
    last_success_at: Option<DateTime<Utc>>,
    /// When its next delivery is due (a retry, while it fails).
    next_attempt: Option<DateTime<Utc>>,
    /// How many of its latest attempts of the last 7 days were looked at (at most 100), and failed.
    recent_attempts: i64,
    recent_failures: i64,
    /// While it fails: its latest failure.
    last_failure: Option<LastFailureOut>,
}

#[derive(Serialize, ToSchema)]
struct EndpointHealthListOut {
    data: Vec<EndpointHealthOut>,
}

impl From<Health> for EndpointHealthOut {
    fn from(h: Health) -> Self {
        EndpointHealthOut {
            endpoint_id: h.endpoint_id.to_string(),
            disabled: h.disabled,
            failing_since: h.failing_since,
            last_success_at: h.last_success_at,
            next_attempt: h.next_attempt_at,
            recent_attempts: h.recent,
            recent_failures: h.recent_failed,
            last_failure: h.last_failure.map(|(timestamp, response_status_code, response)| LastFailureOut {
                timestamp,
                response_status_code,
                response,
            }),
        }
    }
}

/// `?endpoint_id=`: one endpoint's health only.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct HealthQuery {
    endpoint_id: Option<String>,
}

/// The health of the application's HTTP endpoints (at most 250, newest first),
/// or of one (`endpoint_id`, its id; an unknown one answers an empty list).
#[utoipa::path(params(HealthQuery), tag = "Endpoint", operation_id = "hookgate.endpoint.health", responses((status = 200, body = EndpointHealthListOut)))]
#[get("/app/{app_id}/endpoint-health")]
async fn health(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<HealthQuery>,
) -> Result<HttpResponse, ApiError> {
    let only = match q.endpoint_id.as_deref() {
        None => None,
        Some(id) => Some(
            EndpointId::parse(id).map_err(|_| ApiError::Validation("`endpoint_id` is not an endpoint id".into()))?,
        ),
    };
    let app = find_app(&state, &tenant, &path).await?;
    let found = state.read(async |c| endpoint_health::for_app(c, &tenant.0, &app.id, only.as_ref()).await).await?;
    Ok(HttpResponse::Ok().json(EndpointHealthListOut { data: found.into_iter().map(Into::into).collect() }))
}
