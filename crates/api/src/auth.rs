//! Authentication middleware: the operator's bearer token for `/admin`, a
//! tenant API key for `/api/v1`. Each sets the request's [`Principal`].

use crate::{message_access, poller_access, portal_access, PortalAccess, Principal};
use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::header::AUTHORIZATION,
    middleware::Next,
    web, Error, HttpMessage, ResponseError,
};
use hookgate_shared::{
    crypto::{portal_token_id, secrets_equal, PortalClaims},
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{api_keys, applications, integrations, poller_tokens, portal_tokens},
    AppState,
};

fn bearer(req: &ServiceRequest) -> Option<&str> {
    let value = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Answers a refused request here, so outer middleware sees a response (with its
/// request id and metrics) rather than an error.
pub fn reject(req: ServiceRequest, e: ApiError) -> Result<ServiceResponse<BoxBody>, Error> {
    Ok(req.into_response(e.error_response()))
}

fn state(req: &ServiceRequest) -> web::Data<AppState> {
    req.app_data::<web::Data<AppState>>().cloned().expect("AppState is registered on the app")
}

/// Admits the operator, by constant-time comparison with `HOOKGATE_ADMIN_TOKEN`.
pub async fn require_operator(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let state = state(&req);
    let Some(expected) = state.config.admin_token.as_deref() else {
        return reject(
            req,
            ApiError::Unauthorized("the admin API is disabled: HOOKGATE_ADMIN_TOKEN is not set".into()),
        );
    };
    match bearer(&req) {
        Some(token) if secrets_equal(token.as_bytes(), expected.as_bytes()) => {}
        Some(_) => return reject(req, ApiError::Unauthorized("invalid admin token".into())),
        None => return reject(req, ApiError::Unauthorized("missing `Authorization: Bearer <admin token>`".into())),
    }
    req.extensions_mut().insert(Principal::Operator);
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Admits a tenant by one of its live API keys.
pub async fn require_tenant(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let state = state(&req);
    if req.headers().contains_key(INSPECT) {
        let principal = match inspector(&state, &req).await {
            Ok(p) => p,
            Err(e) => return reject(req, e),
        };
        req.extensions_mut().insert(principal);
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let principal = match authenticate_tenant(&state, bearer(&req)).await {
        Ok(p) => p,
        Err(e) => return reject(req, e),
    };
    if let Principal::Portal { tenant, app_id, read_only, message_only, poller, .. } = &principal {
        // Read-only: reading, but not the signing secret (Svix's `ViewBase`).
        // A read-only link may still end itself (`logout`).
        let logout = req.path().trim_end_matches('/') == "/api/v1/auth/logout";
        if *read_only && !logout && (req.method() != actix_web::http::Method::GET || req.path().ends_with("/secret")) {
            return reject(req, ApiError::Forbidden("this app-portal link is read-only".into()));
        }
        let (method, path) = (req.method().as_str(), req.path());
        let access = match (poller, message_only) {
            (Some((ep, _)), _) => poller_access(app_id, ep, method, path),
            (None, true) => message_access(app_id, method, path),
            (None, false) => portal_access(app_id, method, path),
        };
        let allowed = match access {
            PortalAccess::Allowed => Ok(Some(true)),
            PortalAccess::Denied => Ok(Some(false)),
            PortalAccess::IfAppIs(segment) => match names_app(&state, tenant, &segment, app_id).await {
                // The handler then finds the application by the id checked here, not
                // by a uid that another application may take in between.
                Ok(true) => Ok(Some(pin_app(&mut req, &segment, app_id))),
                // Another application: as Svix answers it, not found (it is not
                // this token's to know whether it exists).
                Ok(false) => Ok(None),
                Err(e) => Err(e),
            },
        };
        match allowed {
            Ok(Some(true)) => {}
            Ok(Some(false)) => {
                return reject(req, ApiError::Forbidden("this app-portal token does not grant that request".into()))
            }
            Ok(None) => return reject(req, ApiError::NotFound("application")),
            Err(e) => return reject(req, e),
        }
    }
    req.extensions_mut().insert(principal);
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The header with which the operator's admin token reads one tenant's data.
const INSPECT: &str = "hookgate-tenant";

/// The operator reading a tenant's data: the admin token, a tenant that exists,
/// `GET` only, and no route that shows a credential (the operator helps a
/// customer; it does not need the customer's secrets to do so).
async fn inspector(state: &AppState, req: &ServiceRequest) -> Result<Principal, ApiError> {
    let Some(expected) = state.config.admin_token.as_deref() else {
        return Err(ApiError::Unauthorized("the admin API is disabled: HOOKGATE_ADMIN_TOKEN is not set".into()));
    };
    match bearer(req) {
        Some(token) if secrets_equal(token.as_bytes(), expected.as_bytes()) => {}
        _ => return Err(ApiError::Unauthorized("`Hookgate-Tenant` is for the admin token only".into())),
    }
    if req.method() != actix_web::http::Method::GET {
        return Err(ApiError::Forbidden(crate::principal::INSPECTOR_READS.into()));
    }
    if !crate::principal::inspector_may_read(req.path()) {
        return Err(ApiError::Forbidden(
            "the operator reads a tenant's applications, endpoints, messages, attempts and event types, \
             and nothing that holds a credential"
                .into(),
        ));
    }
    let given = req.headers().get(INSPECT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let tenant = TenantId::parse(given.trim())
        .map_err(|_| ApiError::Validation("`Hookgate-Tenant`: not a tenant id (`tnt_…`)".into()))?;
    let found = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        hookgate_shared::store::tenants::get(&**conn, &tenant).await
    })
    .await?;
    match found {
        Some(t) if t.id.as_str() != hookgate_shared::store::tenants::OPERATOR => Ok(Principal::Inspector { tenant }),
        _ => Err(ApiError::NotFound("tenant")),
    }
}

/// Rewrites `/api/v1/app/{uid}/…` to `/api/v1/app/{app_id}/…`; false if the path
/// does not have that shape (then the request is refused).
fn pin_app(req: &mut ServiceRequest, segment: &str, app_id: &str) -> bool {
    let prefix = format!("/api/v1/app/{segment}");
    let Some(rest) = req.path().strip_prefix(&prefix).map(str::to_owned) else { return false };
    let query = req.query_string();
    let pinned = match query.is_empty() {
        true => format!("/api/v1/app/{app_id}{rest}"),
        false => format!("/api/v1/app/{app_id}{rest}?{query}"),
    };
    let Ok(uri) = pinned.parse::<actix_web::http::Uri>() else { return false };
    req.match_info_mut().get_mut().update(&uri);
    req.head_mut().uri = uri;
    true
}

/// Whether a path's application segment (a uid) names the token's application now.
async fn names_app(state: &AppState, tenant: &TenantId, segment: &str, app_id: &str) -> Result<bool, ApiError> {
    let Ok(app) = Ref::<AppId>::parse(segment) else { return Ok(false) };
    let found = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        applications::get(&**conn, tenant, &app).await
    })
    .await?;
    Ok(found.is_some_and(|a| a.id.as_str() == app_id))
}

/// Whether `expire-all` or a logout refuses the token: asked every second at
/// most per token (a revocation forgets the answers at once in its process), a
/// token not known live waiting its turn at the pre-auth gate.
async fn revoked(state: &AppState, claims: &PortalClaims, token: &str) -> Result<bool, ApiError> {
    let id = portal_token_id(token);
    if let Some(live) = state.caches.portal_tokens.get(&id) {
        return Ok(!live);
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let lookup = async {
        let conn = db::conn(&state.db).await?;
        portal_tokens::is_revoked(
            &**conn,
            &claims.tenant,
            &claims.app_id,
            &claims.session,
            &id,
            claims.issued_ms,
            now_ms,
        )
        .await
    };
    let known = state.caches.known_key_ids.get(&claims.key).is_some();
    let revoked = db::bounded(state.db_budget(), state.pre_auth.run_unless_known(known, lookup)).await?;
    state.caches.portal_tokens.insert(id, !revoked);
    Ok(revoked)
}

/// Whether a poller token's generation still works (a rotation ends the one
/// before, at once or after its grace); true for every other token.
async fn poller_live(state: &AppState, claims: &PortalClaims) -> Result<bool, ApiError> {
    let Some((ep, generation)) = &claims.poller else { return Ok(true) };
    let (Ok(app), Ok(ep)) = (AppId::parse(&claims.app_id), EndpointId::parse(ep)) else { return Ok(false) };
    let lookup = async {
        let conn = db::conn(&state.db).await?;
        poller_tokens::is_live(&**conn, &claims.tenant, &app, &ep, *generation).await
    };
    Ok(db::bounded(state.db_budget(), lookup).await?)
}

/// An application integration's key acts as a portal token of its application
/// that never expires: the application's routes only, its feature flags, until
/// the key is rotated or the integration deleted (looked up every second at most).
async fn authenticate_integration(state: &AppState, key: &str) -> Result<Principal, ApiError> {
    let invalid = || ApiError::Unauthorized("invalid integration key".into());
    let tenant = integrations::tenant_of_key(key).ok_or_else(invalid)?;
    let hash = state.api_keys.hash(key);
    let holder = match state.caches.integration_keys.get(&hash) {
        Some(cached) => cached,
        None => {
            let lookup = async {
                let conn = db::conn(&state.db).await?;
                integrations::authenticate(&**conn, &tenant, &hash).await
            };
            let known = state.caches.known_keys.get(&hash).is_some();
            let found = db::bounded(state.db_budget(), state.pre_auth.run_unless_known(known, lookup)).await?;
            let found = found.map(std::sync::Arc::new);
            if found.is_some() {
                state.caches.known_keys.insert_evicting(hash.clone(), ());
            }
            state.caches.integration_keys.insert(hash, found.clone());
            found
        }
    };
    let holder = holder.ok_or_else(invalid)?;
    Ok(Principal::Portal {
        tenant,
        app_id: holder.app_id.to_string(),
        app_uid: holder.app_uid.clone(),
        feature_flags: holder.feature_flags.clone(),
        read_only: false,
        message_only: false,
        poller: None,
        token_id: String::new(),
        issued_ms: 0,
    })
}

async fn authenticate_tenant(state: &AppState, key: Option<&str>) -> Result<Principal, ApiError> {
    let key = key.ok_or_else(|| ApiError::Unauthorized("missing `Authorization: Bearer <API key>`".into()))?;
    if key.starts_with("hgp_") {
        let claims = state
            .config
            .master_key
            .portal_signer()
            .verify(key, chrono::Utc::now().timestamp())
            .ok_or_else(|| ApiError::Unauthorized("invalid or expired app-portal token".into()))?;
        // A portal token dies with its tenant's access and with the key that minted
        // it: checked every second (a revocation forgets the answer at once), a key
        // not known live waiting its turn at the pre-auth gate.
        let live = match state.caches.portal_keys.get(&claims.key) {
            Some(live) => live,
            None => {
                let lookup = async {
                    let conn = db::conn(&state.db).await?;
                    api_keys::is_live(&**conn, &claims.tenant, &claims.key).await
                };
                let known = state.caches.known_key_ids.get(&claims.key).is_some();
                let live = db::bounded(state.db_budget(), state.pre_auth.run_unless_known(known, lookup)).await?;
                if live {
                    state.caches.known_key_ids.insert_evicting(claims.key.clone(), ());
                }
                state.caches.portal_keys.insert(claims.key.clone(), live);
                live
            }
        };
        if !live || revoked(state, &claims, key).await? || !poller_live(state, &claims).await? {
            return Err(ApiError::Unauthorized("invalid or expired app-portal token".into()));
        }
        return Ok(Principal::Portal {
            token_id: portal_token_id(key),
            issued_ms: claims.issued_ms,
            tenant: claims.tenant,
            app_id: claims.app_id,
            app_uid: claims.app_uid,
            feature_flags: claims.feature_flags,
            read_only: claims.read_only,
            message_only: claims.message_only,
            poller: claims.poller,
        });
    }
    if key.starts_with(integrations::KEY_PREFIX) {
        return authenticate_integration(state, key).await;
    }
    // Svix's words for a key it does not know.
    let invalid = || ApiError::Unauthorized("Invalid token".into());
    let tenant = api_keys::tenant_of_key(key).ok_or_else(invalid)?;
    let hash = state.api_keys.hash(key);
    let found = match state.caches.keys.get(&hash) {
        Some(cached) => cached,
        None => {
            let lookup = async {
                let conn = db::conn(&state.db).await?;
                api_keys::authenticate(&**conn, &tenant, &hash).await
            };
            // A key found live lately is looked up at once; any other waits its
            // turn at the pre-auth gate, so unknown keys cannot take the pool.
            let known = state.caches.known_keys.get(&hash).is_some();
            let found = db::bounded(state.db_budget(), state.pre_auth.run_unless_known(known, lookup)).await?;
            let found = found.map(|id| (tenant.clone(), id));
            if found.is_some() {
                state.caches.known_keys.insert_evicting(hash.clone(), ());
            }
            state.caches.keys.insert(hash, found.clone());
            found
        }
    };
    let (tenant, key_id) = found.ok_or_else(invalid)?;
    Ok(Principal::Tenant { tenant, key: key_id })
}
