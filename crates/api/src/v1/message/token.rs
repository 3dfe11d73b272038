//! `v1.authentication.create-message-token`: a token that may create messages in
//! one application and do nothing else, for a service that only publishes.

use actix_web::{post, web, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use hookgate_shared::{
    crypto::{portal_token_id, PortalClaims},
    http::ApiError,
    ids::{AppId, Ref},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::applications;
use crate::{KeyHolder, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create);
}

/// A year, when `expiry` is left out (Svix's tokens do not expire; Hookgate's
/// always do, and die sooner with the key that made them).
const DEFAULT_EXPIRY_SECS: u64 = 365 * 86_400;
const LONGEST_EXPIRY_SECS: u64 = 5 * 365 * 86_400;
const LONGEST_NAME: usize = 256;

/// The token's name (answered back, not kept: the token carries what it may do)
/// and its lifetime in seconds.
#[derive(Deserialize, ToSchema)]
#[schema(as = CreateTokenIn)]
struct CreateTokenIn {
    name: String,
    expiry: Option<u64>,
}

/// A token of a limited kind (a message token, a poller token), as Svix answers it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApiTokenOut)]
pub(crate) struct ApiTokenOut {
    pub token: String,
    /// What a logout or `expire-all` of the application ends it by.
    pub id: String,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub scopes: Option<Vec<String>>,
}

/// A token limited to `POST /api/v1/app/{app_id}/msg` (and `whoami`); it lives
/// until `expiry`, until the API key that made it is revoked, or until
/// `…/expire-all` of its application.
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.create-message-token", request_body = CreateTokenIn, responses((status = 200, body = ApiTokenOut)))]
#[post("/auth/app/{app_id}/create-message-token")]
async fn create(
    key: KeyHolder,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<CreateTokenIn>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if body.name.is_empty() || body.name.len() > LONGEST_NAME || body.name.chars().any(char::is_control) {
        return Err(ApiError::Validation(format!("`name` must be 1 to {LONGEST_NAME} characters, none a control")));
    }
    let expiry = body.expiry.unwrap_or(DEFAULT_EXPIRY_SECS);
    if !(60..=LONGEST_EXPIRY_SECS).contains(&expiry) {
        return Err(ApiError::Validation(format!("`expiry` must be 60 to {LONGEST_EXPIRY_SECS} seconds")));
    }
    let KeyHolder(tenant, minted_by) = key;
    let app = applications::find(&state, &TenantAuth(tenant.clone()), &path).await?;
    let now = Utc::now();
    let expires_at = now + Duration::seconds(expiry as i64);
    let claims = PortalClaims {
        tenant,
        app_id: app.id.to_string(),
        app_uid: app.uid.clone(),
        expires: expires_at.timestamp(),
        feature_flags: Vec::new(),
        read_only: false,
        message_only: true,
        poller: None,
        key: minted_by,
        session: String::new(),
        issued_ms: now.timestamp_millis(),
    };
    let token = state.config.master_key.portal_signer().issue(&claims);
    Ok(HttpResponse::Ok().json(ApiTokenOut {
        id: portal_token_id(&token),
        token,
        name: Some(body.name),
        created_at: now,
        expires_at: Some(expires_at),
        scopes: Some(vec!["message.create".to_owned()]),
    }))
}
