//! `v1.authentication.whoami`: what the caller's credential is, as Svix answers it.

use actix_web::{get, HttpMessage, HttpRequest, HttpResponse};
use hookgate_shared::http::ApiError;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::Principal;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(whoami);
}

/// How the request authenticated, in Svix's words.
#[derive(Serialize, ToSchema)]
#[schema(as = AuthenticationSource)]
enum Source {
    /// An app-portal token (Svix's are JWTs).
    SvixJwt,
    /// A tenant's API key.
    GlobalAuthToken,
}

/// The tenant (Svix's environment) the credential belongs to, and the one
/// application it is limited to, if it is an app-portal token.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = WhoamiOut)]
struct WhoamiOut {
    env_id: Option<String>,
    app_id: Option<String>,
    permission_source: Source,
    /// Hookgate's: whether an app-portal token may only read (absent for an API key).
    #[serde(skip_serializing_if = "Option::is_none")]
    read_only: Option<bool>,
}

#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.whoami", responses((status = 200, body = WhoamiOut)))]
#[get("/auth/whoami")]
async fn whoami(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let out = match req.extensions().get::<Principal>() {
        Some(Principal::Tenant { tenant, .. }) => WhoamiOut {
            env_id: Some(tenant.to_string()),
            app_id: None,
            permission_source: Source::GlobalAuthToken,
            read_only: None,
        },
        Some(Principal::Inspector { tenant }) => WhoamiOut {
            env_id: Some(tenant.to_string()),
            app_id: None,
            permission_source: Source::GlobalAuthToken,
            read_only: Some(true),
        },
        Some(Principal::Portal { tenant, app_id, read_only, .. }) => WhoamiOut {
            env_id: Some(tenant.to_string()),
            app_id: Some(app_id.clone()),
            permission_source: Source::SvixJwt,
            read_only: Some(*read_only),
        },
        _ => return Err(ApiError::Unauthorized("a tenant API key or an app-portal token is required".into())),
    };
    Ok(HttpResponse::Ok().json(out))
}
