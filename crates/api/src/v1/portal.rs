//! `v1.authentication.app-portal-access`: a token for one application's customer.

use crate::{optional_json, KeyAuth, Principal, TenantAuth};
use actix_web::{post, web, HttpMessage, HttpRequest, HttpResponse};
use chrono::Utc;
use hookgate_shared::ids::{AppId, Ref};
use hookgate_shared::{crypto::PortalClaims, db, http::ApiError, store::applications::Application, AppState};
use serde::Deserialize;
use serde_json::json;

use super::{
    applications::{find as find_app, AppIn},
    validate,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(access);
}

/// Default lifetime of a portal token: 7 days.
const DEFAULT_EXPIRY_SECS: i64 = 7 * 86_400;

/// Longest `featureFlags` may be, joined: the token travels in a header, and
/// proxies refuse headers of more than about 8 KiB.
const MAX_FLAGS_LEN: usize = 1024;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
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
    let feature_flags = body.feature_flags.unwrap_or_default();
    if feature_flags.len() > 32 || feature_flags.iter().map(|f| f.len() + 1).sum::<usize>() > MAX_FLAGS_LEN {
        return Err(ApiError::Validation(format!("at most 32 `featureFlags`, {MAX_FLAGS_LEN} characters in all")));
    }
    for flag in &feature_flags {
        validate::uid("featureFlags", flag)?;
    }
    // The token is bound to the key that mints it (see `PortalClaims::key`).
    let minted_by = match req.extensions().get::<Principal>() {
        Some(Principal::Tenant { key, .. }) => key.clone(),
        _ => return Err(ApiError::Unauthorized("a tenant API key is required".into())),
    };
    let tenant = TenantAuth(key.0);
    let app = match (find_app(&state, &tenant, &path).await, body.application, &*path) {
        (Err(ApiError::NotFound(_)), Some(new), Ref::Uid(uid)) => create_alongside(&state, &tenant, uid, new).await?,
        (found, _, _) => found?,
    };
    let claims = PortalClaims {
        tenant: tenant.0.clone(),
        app_id: app.id.to_string(),
        app_uid: app.uid.clone(),
        expires: Utc::now().timestamp() + expiry,
        feature_flags,
        read_only: body.read_only.unwrap_or(false)
            || body.capabilities.is_some_and(|c| !c.iter().any(|c| c == "ManageEndpoint")),
        key: minted_by,
    };
    let token = state.config.master_key.portal_signer().issue(&claims);
    let url = format!(
        "{}/portal/{}/{}#key={token}",
        hookgate_shared::http::public_base(&req, &state.config),
        tenant.0,
        app.id
    );
    Ok(HttpResponse::Ok().json(json!({ "token": token, "url": url })))
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
    let mut fields = new.into_fields()?;
    fields.uid.get_or_insert_with(|| uid.to_owned());
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
