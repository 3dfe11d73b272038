//! `v1.endpoint.transformation`: get and patch an endpoint's JavaScript
//! transformation (`code`, `enabled`, `variables`), as Svix's SDKs call it, and
//! Hookgate's own `…/transformation/try`, which the portal's editor runs.

use std::collections::BTreeMap;

use actix_web::{get, patch, put, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use hookgate_egress::{
    sandbox::{Sandbox, Scope},
    secrets,
};
use hookgate_shared::ids::{AppId, EndpointId, Ref};
use hookgate_shared::store::{tenants, transformations};
use hookgate_shared::{db, http::ApiError, AppState};

use super::endpoint::crud::find;
use super::transformation_try::{EpPath, MOST_CODE, OFF};
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_one)
        .service(patch_one)
        .service(super::transformation_try::try_one)
        .service(super::transformation_try::simulate)
        .service(get_switch)
        .service(put_switch)
        .service(get_destination)
        .service(patch_destination);
}

/// Variables a transformation may have, and the longest name and value.
const MOST_VARIABLES: usize = 32;
const MOST_NAME: usize = 128;
const MOST_VALUE: usize = 4096;

/// What a transformation's PATCH sets; what it leaves out is kept.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EndpointTransformationPatch)]
pub(crate) struct TransformationPatch {
    code: Option<String>,
    enabled: Option<bool>,
    variables: Option<BTreeMap<String, String>>,
}

/// An endpoint's transformation (Svix's `EndpointTransformationOut`), and
/// `available`: whether the tenant's transformations are switched on.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndpointTransformationOut {
    available: bool,
    /// `null` while the endpoint has none.
    code: Option<String>,
    enabled: bool,
    updated_at: Option<DateTime<Utc>>,
    /// Names and values; a value hidden from the caller reads `[redacted]`.
    #[schema(value_type = BTreeMap<String, String>)]
    variables: Value,
}

/// The tenant's transformation switches.
#[derive(Serialize, ToSchema)]
struct TransformationSwitchOut {
    /// Both switches are on: transformations run.
    active: bool,
    /// The operator's switch.
    allowed: bool,
    /// The tenant's own switch.
    enabled: bool,
}

/// Besides Svix's fields, `available` (Hookgate's own): whether the tenant's
/// transformations are switched on, so the portal can say why one cannot be enabled.
/// Variables may hold credentials: a portal link sees their values by the rule
/// for custom headers (a managing link, when the tenant shows header values),
/// and `[redacted]` otherwise.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.transformation.get", responses((status = 200, body = EndpointTransformationOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/transformation")]
async fn get_one(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    get_of(&tenant, &req, &state, app, ep).await
}

/// A destination's transformation (Svix's `destination.transformation`): run on
/// each message before it is handed over, as an endpoint's before it is sent.
/// The handler's `url` and `method` do not apply to a destination.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.destination-transformation.get", responses((status = 200, body = EndpointTransformationOut)))]
#[get("/app/{app_id}/destination/{destination_id}/transformation")]
async fn get_destination(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find_destination(&state, &tenant, &path.0, &path.1).await?;
    get_of(&tenant, &req, &state, app, ep).await
}

/// A pushed destination (FIFO and polling endpoints read their log: no
/// transformation runs for them); 404 for anything else.
async fn find_destination(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    dest: &Ref<EndpointId>,
) -> Result<(AppId, hookgate_shared::store::endpoints::Endpoint), ApiError> {
    match super::endpoint::crud::find_any(state, tenant, app, dest).await {
        Ok((_, ep)) if ep.kind.is_sink() => {
            Err(ApiError::Conflict("a FIFO or polling endpoint has no transformation: it reads its log".into()))
        }
        Ok((app, ep)) if ep.kind.is_destination() => Ok((app, ep)),
        Ok(_) | Err(ApiError::NotFound("endpoint")) => Err(ApiError::NotFound("destination")),
        Err(e) => Err(e),
    }
}

pub(crate) async fn get_of(
    tenant: &TenantAuth,
    req: &HttpRequest,
    state: &AppState,
    app: AppId,
    ep: hookgate_shared::store::endpoints::Endpoint,
) -> Result<HttpResponse, ApiError> {
    let hidden = super::endpoint::headers::values_hidden(req, state, &tenant.0).await?;
    let conn = db::conn(&state.db).await?;
    let available = tenants::get(&**conn, &tenant.0).await?.is_some_and(|t| t.transforms());
    let stored = transformations::get(&**conn, &tenant.0, &app, &ep.id).await?;
    let Some(t) = stored else {
        let none =
            EndpointTransformationOut { available, code: None, enabled: false, updated_at: None, variables: json!({}) };
        return Ok(HttpResponse::Ok().json(none));
    };
    let mut variables = secrets::open_variables(state, &tenant.0, &app, &ep.id, t.variables.as_deref())
        .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?;
    if let (true, Some(vars)) = (hidden, variables.as_object_mut()) {
        vars.values_mut().for_each(|v| *v = json!("[redacted]"));
    }
    Ok(HttpResponse::Ok().json(EndpointTransformationOut {
        available,
        code: Some(t.code),
        enabled: t.enabled,
        updated_at: Some(t.updated_at),
        variables,
    }))
}

/// Sets what the body gives and keeps the rest. Enabling needs the tenant's
/// transformations switched on (by the operator), and code that runs and
/// defines `handler`: both are checked here, not at the first delivery.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.transformation.patch", responses((status = 204, description = "saved")))]
#[patch("/app/{app_id}/endpoint/{endpoint_id}/transformation")]
async fn patch_one(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<TransformationPatch>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let caller = super::transformation_try::Caller::of(&req, &state, &tenant.0).await?;
    patch_of(&tenant, &state, body, app, ep, caller).await
}

/// Sets a destination's transformation; `code` alone enables it (or, empty, turns it off).
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.destination-transformation.patch", responses((status = 200, body = crate::openapi::EmptyResponse)))]
#[patch("/app/{app_id}/destination/{destination_id}/transformation")]
async fn patch_destination(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<TransformationPatch>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find_destination(&state, &tenant, &path.0, &path.1).await?;
    // Svix's `DestinationTransformIn` has only `code`: code given enables it,
    // empty code turns it off, unless `enabled` says otherwise.
    let mut body = body.into_inner();
    if body.enabled.is_none() {
        body.enabled = body.code.as_ref().map(|c| !c.trim().is_empty());
    }
    let caller = super::transformation_try::Caller::of(&req, &state, &tenant.0).await?;
    patch_of(&tenant, &state, body, app, ep, caller).await?;
    // The SDK reads a body here (`EmptyResponse`), where the endpoint's answers 204.
    Ok(HttpResponse::Ok().json(crate::openapi::EmptyResponse {}))
}

/// Saves a transformation. A caller that sees the variables as `[redacted]`
/// may change the code that reads them only if it gives the variables too
/// (they replace the stored ones): else its code could send them wherever it
/// liked.
pub(crate) async fn patch_of(
    tenant: &TenantAuth,
    state: &AppState,
    body: TransformationPatch,
    app: AppId,
    ep: hookgate_shared::store::endpoints::Endpoint,
    caller: super::transformation_try::Caller,
) -> Result<HttpResponse, ApiError> {
    if body.code.as_ref().is_some_and(|c| c.len() > MOST_CODE) {
        return Err(ApiError::Validation(format!("`code`: at most {MOST_CODE} bytes")));
    }
    if let Some(vars) = &body.variables {
        if vars.len() > MOST_VARIABLES {
            return Err(ApiError::Validation(format!("`variables`: at most {MOST_VARIABLES}")));
        }
        if let Some((k, _)) = vars.iter().find(|(k, v)| k.is_empty() || k.len() > MOST_NAME || v.len() > MOST_VALUE) {
            return Err(ApiError::Validation(format!(
                "`variables`: `{}`: names of 1-{MOST_NAME} characters, values of at most {MOST_VALUE}",
                k.chars().take(MOST_NAME).collect::<String>()
            )));
        }
    }
    let (before, allowed) = {
        let conn = db::conn(&state.db).await?;
        let before = transformations::get(&**conn, &tenant.0, &app, &ep.id).await?;
        (before, tenants::get(&**conn, &tenant.0).await?.is_some_and(|t| t.transforms()))
    };
    let code = body.code.clone().or_else(|| before.as_ref().map(|t| t.code.clone())).unwrap_or_default();
    let enabled = body.enabled.or(before.as_ref().map(|t| t.enabled)).unwrap_or(false);
    if enabled && !allowed {
        return Err(ApiError::Forbidden(OFF.into()));
    }
    if enabled && code.trim().is_empty() {
        return Err(ApiError::Validation("`code`: a transformation is enabled with code defining `handler`".into()));
    }
    // Code that may run is checked now, in the sandbox, with no connection held:
    // changed code, or code being enabled. (With the tenant's switch off nothing
    // runs, so nothing is run to check it either; enabling it later checks it.)
    let changed = body.code.as_ref().is_some_and(|c| before.as_ref().is_none_or(|b| &b.code != c));
    let enabling = enabled && !before.as_ref().is_some_and(|b| b.enabled);
    if caller.hidden && changed && body.variables.is_none() {
        let kept = match &before {
            Some(t) => secrets::open_variables(state, &tenant.0, &app, &ep.id, t.variables.as_deref())
                .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?,
            None => json!({}),
        };
        if kept.as_object().is_some_and(|v| !v.is_empty()) {
            return Err(ApiError::Forbidden(
                "the endpoint's variables are hidden from this link: change the code together with `variables` \
                 (which replace them), or ask the application's owner"
                    .into(),
            ));
        }
    }
    if allowed && !code.trim().is_empty() && (changed || enabling) {
        super::transformation_try::counted(&tenant.0, &caller)?;
        let scope = Scope { tenant: &tenant.0, app: &app, endpoint: &ep.id, redacted: caller.hidden };
        match Sandbox::for_api().check(&scope, &code).await {
            Ok(()) => {}
            Err(e) if !e.is_the_codes() => return Err(ApiError::Conflict(format!("not checked: {e}"))),
            Err(e) => return Err(ApiError::Validation(format!("`code`: {e}"))),
        }
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(hookgate_shared::store::StoreError::from)?;
    let variables = match body.variables {
        Some(v) => serde_json::to_value(v).map_err(|e| ApiError::Internal(e.to_string()))?,
        None => match &before {
            Some(t) => secrets::open_variables(state, &tenant.0, &app, &ep.id, t.variables.as_deref())
                .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?,
            None => json!({}),
        },
    };
    let sealed = secrets::seal_variables(state, &tenant.0, &app, &ep.id, &variables);
    let saved = transformations::set(&*tx, &tenant.0, &app, &ep.id, &code, enabled, Some(&sealed)).await?;
    tx.commit().await.map_err(hookgate_shared::store::StoreError::from)?;
    tracing::info!(endpoint = %ep.id, enabled = saved.enabled, "transformation saved");
    Ok(HttpResponse::NoContent().finish())
}

/// The tenant's switches: `allowed` (the operator's), `enabled` (its own), and
/// `active` (both: transformations run).
fn switch_out(t: &tenants::Tenant) -> TransformationSwitchOut {
    TransformationSwitchOut { active: t.transforms(), allowed: t.transformations, enabled: !t.transformations_off }
}

/// The tenant's transformation switches: the operator's, its own, and whether they run.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.transformation-settings.get", responses((status = 200, body = TransformationSwitchOut)))]
#[get("/settings/transformations")]
async fn get_switch(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let t = tenants::get(&**conn, &key.0).await?.ok_or(ApiError::NotFound("tenant"))?;
    Ok(HttpResponse::Ok().json(switch_out(&t)))
}

/// The tenant's own transformation switch.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TransformationSwitchIn)]
struct SwitchIn {
    enabled: bool,
}

/// The tenant turns its transformations off (every enabled one stops before the
/// next delivery, the code kept) or on again; they run only while the operator
/// allows them too.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.transformation-settings.update", responses((status = 200, body = TransformationSwitchOut)))]
#[put("/settings/transformations")]
async fn put_switch(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<SwitchIn>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let t = tenants::set_transformations(&**conn, &key.0, body.enabled).await?.ok_or(ApiError::NotFound("tenant"))?;
    tracing::info!(tenant = %key.0, enabled = body.enabled, "the tenant switched its transformations");
    Ok(HttpResponse::Ok().json(switch_out(&t)))
}
