//! `v1.authentication`: `app-portal-access` (a token for one application's
//! customer), `expire-all` (an application's tokens, or some sessions', refused
//! from now or a moment later) and `logout` (a token refuses itself).

use crate::{optional_json, KeyAuth, Principal, TenantAuth};
use actix_web::{post, web, HttpMessage, HttpRequest, HttpResponse};
use chrono::Utc;
use hookgate_shared::ids::{AppId, Ref};
use hookgate_shared::{
    crypto::PortalClaims,
    db,
    http::ApiError,
    store::{applications::Application, portal_tokens},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{
    applications::{find as find_app, AppIn},
    validate,
};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(access).service(dashboard_access).service(expire_all).service(logout);
}

/// Default lifetime of a portal token: 7 days.
const DEFAULT_EXPIRY_SECS: i64 = 7 * 86_400;

/// Longest `featureFlags` may be, joined: the token travels in a header, and
/// proxies refuse headers of more than about 8 KiB.
const MAX_FLAGS_LEN: usize = 1024;

/// What the token may do, and for how long (the body may be empty).
#[derive(Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = AppPortalAccessIn)]
struct AccessIn {
    /// Lifetime in seconds.
    expiry: Option<i64>,
    /// Event types behind one of these flags are shown to the token's holder.
    feature_flags: Option<Vec<String>>,
    /// The token reads, never changes (and is not shown signing secrets).
    read_only: Option<bool>,
    /// Svix's finer permissions, honoured coarsely: a set without
    /// `ManageEndpoint` makes a read-only token.
    capabilities: Option<Vec<String>>,
    /// Svix's: created alongside when the path's uid names no application yet.
    application: Option<AppIn>,
    /// Svix's: a name `expire-all` can expire this token by (1-64 of a-z A-Z 0-9 @ _ -).
    session_id: Option<String>,
}

/// The token reaches that application's endpoints, messages and attempts only.
/// `url` opens Hookgate's own portal page for the application, with the token in
/// the fragment (never sent to a server, so never in a log).
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.app-portal-access", request_body = Option<AccessIn>, responses((status = 200, body = PortalAccessOut)))]
#[post("/auth/app-portal-access/{app_id}")]
async fn access(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    grant(key, &req, &state, &path, optional_json(&body)?).await
}

/// Svix's deprecated name for `app-portal-access` without a body, kept for the
/// clients that still call it (Svix's own server serves it).
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.dashboard-access", responses((status = 200, body = PortalAccessOut)))]
#[post("/auth/dashboard-access/{app_id}")]
async fn dashboard_access(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
) -> Result<HttpResponse, ApiError> {
    grant(key, &req, &state, &path, AccessIn::default()).await
}

async fn grant(
    key: KeyAuth,
    req: &HttpRequest,
    state: &AppState,
    path: &Ref<AppId>,
    body: AccessIn,
) -> Result<HttpResponse, ApiError> {
    let expiry = body.expiry.unwrap_or(DEFAULT_EXPIRY_SECS);
    if !(60..=30 * 86_400).contains(&expiry) {
        return Err(ApiError::Validation("`expiry` must be between 60 seconds and 30 days".into()));
    }
    let feature_flags = body.feature_flags.unwrap_or_default();
    if feature_flags.len() > 32 || feature_flags.iter().map(|f| f.len() + 1).sum::<usize>() > MAX_FLAGS_LEN {
        return Err(ApiError::Validation(format!("at most 32 `featureFlags`, {MAX_FLAGS_LEN} characters in all")));
    }
    for flag in &feature_flags {
        validate::uid("featureFlags", flag)?;
    }
    if let Some(s) = &body.session_id {
        session_id(s)?;
    }
    // The token is bound to the key that mints it (see `PortalClaims::key`).
    let minted_by = match req.extensions().get::<Principal>() {
        Some(Principal::Tenant { key, .. }) => key.clone(),
        _ => return Err(ApiError::Unauthorized("a tenant API key is required".into())),
    };
    let tenant = TenantAuth(key.0);
    let app = match (find_app(state, &tenant, path).await, body.application, path) {
        (Err(ApiError::NotFound(_)), Some(new), path) if path.creatable_uid().is_some() => {
            create_alongside(state, &tenant, path.as_str(), new).await?
        }
        (found, _, _) => found?,
    };
    let read_only =
        body.read_only.unwrap_or(false) || body.capabilities.is_some_and(|c| !c.iter().any(|c| c == "ManageEndpoint"));
    let minted = Minted { expiry, feature_flags, read_only, session: body.session_id.unwrap_or_default() };
    Ok(HttpResponse::Ok().json(mint(req, state, &tenant, &app, minted_by, minted)))
}

/// What a new portal token carries beside its application.
pub(crate) struct Minted {
    /// Lifetime in seconds.
    pub expiry: i64,
    pub feature_flags: Vec<String>,
    pub read_only: bool,
    /// Svix's `sessionId` ('' none): `expire-all` may name it.
    pub session: String,
}

/// An app-portal token and the portal URL that opens with it.
#[derive(Serialize, ToSchema)]
#[schema(as = AppPortalAccessOut)]
pub(crate) struct PortalAccessOut {
    token: String,
    /// Hookgate's portal page for the application, the token in its fragment.
    url: String,
}

/// A token for the application's customer, minted by `key`, and the portal URL
/// that opens with it.
pub(crate) fn mint(
    req: &HttpRequest,
    state: &AppState,
    tenant: &TenantAuth,
    app: &Application,
    key: hookgate_shared::ids::ApiKeyId,
    m: Minted,
) -> PortalAccessOut {
    let now = Utc::now();
    let claims = PortalClaims {
        tenant: tenant.0.clone(),
        app_id: app.id.to_string(),
        app_uid: app.uid.clone(),
        expires: now.timestamp() + m.expiry,
        feature_flags: m.feature_flags,
        read_only: m.read_only,
        message_only: false,
        poller: None,
        key,
        session: m.session,
        issued_ms: now.timestamp_millis(),
    };
    let token = state.config.master_key.portal_signer().issue(&claims);
    let url = format!(
        "{}/portal/{}/{}#key={token}",
        hookgate_shared::http::public_base(req, &state.config),
        tenant.0,
        app.id
    );
    PortalAccessOut { token, url }
}

/// Svix's `sessionId`: 1 to 64 of `a-zA-Z0-9@_-`.
pub(crate) fn session_id(s: &str) -> Result<(), ApiError> {
    let ok = (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"@_-".contains(&b));
    if !ok {
        return Err(ApiError::Validation("`sessionId` must be 1 to 64 of a-z A-Z 0-9 @ _ -".into()));
    }
    Ok(())
}

/// The application the path's uid names, made now from `new` (its uid the
/// path's unless `new` names one). A concurrent request that made it first wins:
/// it is found again.
async fn create_alongside(
    state: &AppState,
    tenant: &TenantAuth,
    uid: &str,
    new: AppIn,
) -> Result<Application, ApiError> {
    let fields = new.into_fields()?;
    validate::inline_uid(uid, fields.uid.as_deref())?;
    let cap = crate::quota::app_cap(state, &tenant.0).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(hookgate_shared::store::StoreError::from)?;
    let made = crate::quota::insert_app(state, &*tx, &tenant.0, &fields, cap).await;
    let made = match made {
        Ok(app) => tx.commit().await.map(|_| app).map_err(|e| hookgate_shared::store::StoreError::from(e).into()),
        Err(e) => Err(e),
    };
    match made {
        Ok(app) => Ok(app),
        Err(e @ ApiError::Validation(_)) => Err(e),
        Err(e) => find_app(state, tenant, &Ref::Uid(fields.uid.unwrap_or_default()))
            .await
            .map_err(|_| validate::conflict("an application with this uid")(e)),
    }
}

/// Which tokens to expire, and when (the body may be empty).
#[derive(Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = ApplicationTokenExpireIn)]
struct ExpireIn {
    /// Seconds until the tokens are refused (0 to 72 hours; none: now).
    expiry: Option<i64>,
    /// Only the tokens made with one of these `sessionId`s.
    session_ids: Option<Vec<String>>,
}

/// Sessions one `expire-all` may name.
const MOST_SESSIONS: usize = 1000;

/// Every app-portal token of the application made until now (or, with
/// `sessionIds`, those of the sessions named) is refused from `expiry` seconds
/// on. Tokens made after the request live their time.
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.expire-all", request_body = Option<ExpireIn>, responses((status = 204, description = "expired")))]
#[post("/auth/app/{app_id}/expire-all")]
async fn expire_all(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: ExpireIn = optional_json(&body)?;
    let expiry = body.expiry.unwrap_or(0);
    if !(0..=72 * 3600).contains(&expiry) {
        return Err(ApiError::Validation("`expiry` must be between 0 and 259200 seconds (72 hours)".into()));
    }
    let sessions = match body.session_ids {
        Some(ids) if !ids.is_empty() => {
            if ids.len() > MOST_SESSIONS {
                return Err(ApiError::Validation(format!("`sessionIds`: at most {MOST_SESSIONS}")));
            }
            ids.iter().try_for_each(|s| session_id(s))?;
            ids
        }
        _ => vec![String::new()],
    };
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path).await?;
    let now_ms = Utc::now().timestamp_millis();
    let conn = db::conn(&state.db).await?;
    // `+ 1`: a token made in this very millisecond is made before the request ends.
    portal_tokens::revoke(&**conn, &tenant.0, &app.id, &sessions, now_ms + 1, now_ms + expiry * 1000, &state.caches)
        .await?;
    tracing::info!(app = %app.id, sessions = sessions.len(), expiry, "app-portal tokens expired");
    Ok(HttpResponse::NoContent().finish())
}

/// The calling app-portal token is refused from now on; any other credential
/// gets 403 (an API key is revoked through the admin API, an integration's key
/// rotated).
#[utoipa::path(tag = "Authentication", operation_id = "v1.authentication.logout", responses((status = 204, description = "logged out")))]
#[post("/auth/logout")]
async fn logout(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let principal = req.extensions().get::<Principal>().cloned();
    let Some(Principal::Portal { tenant, app_id, token_id, issued_ms, .. }) = principal else {
        return Err(ApiError::Forbidden("only an app-portal token logs out; revoke an API key instead".into()));
    };
    if token_id.is_empty() {
        return Err(ApiError::Forbidden("an integration key does not log out: rotate it instead".into()));
    }
    let app = hookgate_shared::ids::AppId::from_db(app_id);
    let sessions = [portal_tokens::logged_out(&token_id)];
    let conn = db::conn(&state.db).await?;
    // The token was made before now, by any clock: `now` names it, and keeps the
    // row until no token made before it can be alive (a token of seven lines,
    // made "at 0", included).
    let now_ms = Utc::now().timestamp_millis().max(issued_ms + 1);
    portal_tokens::revoke(&**conn, &tenant, &app, &sessions, now_ms, now_ms, &state.caches).await?;
    Ok(HttpResponse::NoContent().finish())
}
