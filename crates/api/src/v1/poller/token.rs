//! `v1.authentication.{get,rotate}-poller-token`: a token that may only poll one
//! polling endpoint, for a customer's poller that should hold nothing more.

use actix_web::{get, post, web, HttpResponse};
use chrono::{Duration, TimeZone, Utc};
use hookgate_shared::{
    crypto::{portal_token_id, PortalClaims},
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    status::EndpointKind,
    store::{
        api_keys,
        applications::Application,
        poller_tokens::{self, Rotated},
        portal_tokens, StoreError,
    },
    AppState,
};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::endpoint::crud::find_any;
use crate::v1::message::token::ApiTokenOut;
use crate::{optional_json, KeyHolder, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_token).service(rotate_token);
}

/// A year: Svix's longest, and the lifetime of a token made by `GET` when there was none.
const LONGEST_EXPIRY_SECS: i64 = 31_536_000;
/// How long the token before a rotation keeps working unless `oldTokenExpiry` says.
const DEFAULT_OLD_EXPIRY_SECS: i64 = 300;

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = RotatePollerTokenIn)]
struct RotateIn {
    /// The new token's lifetime in seconds (1 to a year; a year if left out).
    expiry: Option<i64>,
    /// How long the token before keeps working, in seconds (0 to a day; 300 if left out).
    old_token_expiry: Option<i64>,
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// The polling endpoint (404 for any other kind, as it has no poller).
async fn polling(state: &AppState, tenant: &TenantAuth, path: &EpPath) -> Result<(Application, EndpointId), ApiError> {
    let (app_id, ep) = find_any(state, tenant, &path.0, &path.1).await?;
    if ep.kind != EndpointKind::PollingEndpoint {
        return Err(ApiError::NotFound("polling endpoint"));
    }
    let app = crate::v1::applications::find(state, tenant, &Ref::Id(app_id)).await?;
    Ok((app, ep.id))
}

/// The token of a generation, minted the same way every time: `GET` answers the
/// same text until a rotation.
fn minted(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Application,
    ep: &EndpointId,
    t: &poller_tokens::PollerToken,
) -> ApiTokenOut {
    let claims = PortalClaims {
        tenant: tenant.0.clone(),
        app_id: app.id.to_string(),
        app_uid: app.uid.clone(),
        expires: t.expires_at.timestamp(),
        feature_flags: Vec::new(),
        read_only: false,
        message_only: false,
        poller: Some((ep.to_string(), t.generation)),
        key: t.key.clone(),
        session: String::new(),
        issued_ms: t.issued_ms,
    };
    let token = state.config.master_key.portal_signer().issue(&claims);
    ApiTokenOut {
        id: portal_token_id(&token),
        token,
        name: None,
        created_at: Utc.timestamp_millis_opt(t.issued_ms).single().unwrap_or_else(Utc::now),
        expires_at: Some(t.expires_at),
        scopes: Some(vec![format!("poller:{ep}")]),
    }
}

/// Makes the next generation current if `seen` still is (see [`poller_tokens::rotate`]),
/// in one transaction with the endpoint's lock; the token current afterwards.
async fn rotate(
    state: &AppState,
    key: &KeyHolder,
    app: &Application,
    ep: &EndpointId,
    seen: Option<i32>,
    expiry: i64,
    old: i64,
) -> Result<poller_tokens::PollerToken, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let expires = Utc::now() + Duration::seconds(expiry);
    let grace = std::time::Duration::from_secs(old as u64);
    let rotated = poller_tokens::rotate(&*tx, &key.0, &app.id, ep, seen, &key.1, expires, grace).await?;
    tx.commit().await.map_err(StoreError::from)?;
    match rotated {
        Rotated::Made(t) => Ok(t),
        Rotated::Gone => Err(ApiError::NotFound("polling endpoint")),
        // Another request made one first: that one is current, and answered.
        Rotated::Raced => {
            let conn = db::conn(&state.db).await?;
            poller_tokens::get(&**conn, &key.0, &app.id, ep).await?.ok_or(ApiError::NotFound("polling endpoint"))
        }
    }
}

/// Whether the token of this generation works: unexpired, its key live, and not
/// ended by `expire-all` or a logout.
async fn works(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Application,
    out: &ApiTokenOut,
    t: &poller_tokens::PollerToken,
) -> Result<bool, ApiError> {
    if t.expires_at <= Utc::now() {
        return Ok(false);
    }
    let conn = db::conn(&state.db).await?;
    if !api_keys::is_live(&**conn, &tenant.0, &t.key).await? {
        return Ok(false);
    }
    let now_ms = Utc::now().timestamp_millis();
    let revoked =
        portal_tokens::is_revoked(&**conn, &tenant.0, app.id.as_str(), "", &out.id, t.issued_ms, now_ms).await?;
    Ok(!revoked)
}

/// The polling endpoint's current token: made (for a year) if there is none, or
/// if the API key that made the current one was revoked (which ended it).
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.get-poller-token", responses((status = 200, body = ApiTokenOut)))]
#[get("/auth/app/{app_id}/poller/{endpoint_id}/token")]
async fn get_token(key: KeyHolder, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let tenant = TenantAuth(key.0.clone());
    let (app, ep) = polling(&state, &tenant, &path).await?;
    let current = {
        let conn = db::conn(&state.db).await?;
        poller_tokens::get(&**conn, &key.0, &app.id, &ep).await?
    };
    if let Some(t) = &current {
        let out = minted(&state, &tenant, &app, &ep, t);
        if works(&state, &tenant, &app, &out, t).await? {
            return Ok(HttpResponse::Ok().json(out));
        }
    }
    // None, or one that no longer works: the next, unless another request made it first.
    let seen = current.map(|t| t.generation);
    let token = rotate(&state, &key, &app, &ep, seen, LONGEST_EXPIRY_SECS, 0).await?;
    Ok(HttpResponse::Ok().json(minted(&state, &tenant, &app, &ep, &token)))
}

/// A new token for the polling endpoint; the one before works for `oldTokenExpiry` more seconds.
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.rotate-poller-token", request_body = RotateIn, responses((status = 201, body = ApiTokenOut)))]
#[post("/auth/app/{app_id}/poller/{endpoint_id}/token/rotate")]
async fn rotate_token(
    key: KeyHolder,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: RotateIn = optional_json(&body)?;
    let expiry = body.expiry.unwrap_or(LONGEST_EXPIRY_SECS);
    if !(1..=LONGEST_EXPIRY_SECS).contains(&expiry) {
        return Err(ApiError::Validation(format!("`expiry` must be 1 to {LONGEST_EXPIRY_SECS} seconds")));
    }
    let old = body.old_token_expiry.unwrap_or(DEFAULT_OLD_EXPIRY_SECS);
    if !(0..=86_400).contains(&old) {
        return Err(ApiError::Validation("`oldTokenExpiry` must be 0 to 86400 seconds".into()));
    }
    let tenant = TenantAuth(key.0.clone());
    let (app, ep) = polling(&state, &tenant, &path).await?;
    let seen = {
        let conn = db::conn(&state.db).await?;
        poller_tokens::get(&**conn, &key.0, &app.id, &ep).await?.map(|t| t.generation)
    };
    let token = rotate(&state, &key, &app, &ep, seen, expiry, old).await?;
    Ok(HttpResponse::Created().json(minted(&state, &tenant, &app, &ep, &token)))
}
