//! `v1.authentication.app-portal-access`: a token for one application's customer.

use crate::{optional_json, KeyAuth, TenantAuth};
use actix_web::{post, web, HttpRequest, HttpResponse};
use chrono::Utc;
use hookgate_shared::ids::{AppId, Ref};
use hookgate_shared::{crypto::PortalClaims, http::ApiError, AppState};
use serde::Deserialize;
use serde_json::json;

use super::{applications::find as find_app, validate};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(access);
}

/// Default lifetime of a portal token: 7 days.
const DEFAULT_EXPIRY_SECS: i64 = 7 * 86_400;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AccessIn {
    /// Lifetime in seconds.
    expiry: Option<i64>,
    /// Event types behind one of these flags are shown to the token's holder.
    #[serde(default)]
    feature_flags: Vec<String>,
}

/// The token reaches that application's endpoints, messages and attempts only.
/// `url` opens Hookgate's own portal page for the application, with the token in
/// the fragment (never sent to a server, so never in a log).
#[post("/auth/app-portal-access/{app_id}")]
async fn access(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: AccessIn = optional_json(&body)?;
    let expiry = body.expiry.unwrap_or(DEFAULT_EXPIRY_SECS);
    if !(60..=30 * 86_400).contains(&expiry) {
        return Err(ApiError::Validation("`expiry` must be between 60 seconds and 30 days".into()));
    }
    if body.feature_flags.len() > 32 {
        return Err(ApiError::Validation("at most 32 `featureFlags`".into()));
    }
    for flag in &body.feature_flags {
        validate::uid("featureFlags", flag)?;
    }
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path).await?;
    let claims = PortalClaims {
        tenant: tenant.0.clone(),
        app_id: app.id.to_string(),
        app_uid: app.uid.clone(),
        expires: Utc::now().timestamp() + expiry,
        feature_flags: body.feature_flags,
    };
    let token = state.config.master_key.portal_signer().issue(&claims);
    let url = format!("{}/portal/{}/{}#key={token}", crate::public_base(&req, &state), tenant.0, app.id);
    Ok(HttpResponse::Ok().json(json!({ "token": token, "url": url })))
}
