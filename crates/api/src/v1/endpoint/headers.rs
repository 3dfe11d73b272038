//! An endpoint's custom headers: `v1.endpoint.get-headers`, `update-headers` and
//! `patch-headers`, sealed at rest, sensitive values shown by name only.

use hookgate_shared::ids::{AppId, EndpointId, Ref, TenantId};
use hookgate_shared::store::endpoints::Endpoint;
use std::collections::{BTreeMap, HashMap};

use crate::{Principal, TenantAuth};
use actix_web::{get, patch, put, web, HttpMessage, HttpRequest, HttpResponse};
use hookgate_shared::store::StoreError;
use hookgate_shared::{
    db,
    http::ApiError,
    store::{endpoints, portals},
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::crud::find;
use hookgate_egress::secrets;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_headers).service(update_headers).service(patch_headers);
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// An endpoint's custom headers: `headers` with their values, `sensitive` by name only.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndpointHeadersOut {
    headers: BTreeMap<String, String>,
    sensitive: Vec<String>,
}

impl EndpointHeadersOut {
    pub(crate) fn new(headers: BTreeMap<String, String>, sensitive: Vec<String>) -> Self {
        EndpointHeadersOut { headers, sensitive }
    }
}

pub(crate) use crate::v1::validate::headers as check_headers;
use crate::v1::validate::MAX_HEADERS;
use hookgate_egress::secrets::SENSITIVE_HEADERS as SENSITIVE;

/// Custom headers to set; a `null` value removes one (PATCH), or is left out (PUT).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EndpointHeadersPatchIn)]
struct HeadersIn {
    headers: HashMap<String, Option<String>>,
    /// PATCH only: names to remove (a `null` value removes too).
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    delete_headers: Vec<String>,
}

/// The endpoint's custom headers; sensitive ones (and, for some portal links, all) by name only.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-headers", responses((status = 200, body = EndpointHeadersOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/headers")]
async fn get_headers(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let names_only = values_hidden(&req, &state, &tenant.0).await?;
    headers_answer(&state, &tenant.0, &app, &ep, names_only)
}

/// Whether the caller sees credential-like values (custom headers, transformation
/// variables) by name only: a portal link does, unless it may manage endpoints
/// and the tenant chose to show values; the tenant's own key never does.
pub(crate) async fn values_hidden(req: &HttpRequest, state: &AppState, tenant: &TenantId) -> Result<bool, ApiError> {
    // Read before any await: the request's extensions are a RefCell.
    let portal = match req.extensions().get::<Principal>() {
        // A message or poller token sees no values (no route of theirs shows any).
        Some(Principal::Portal { read_only, message_only, poller, .. }) => {
            Some(*read_only || *message_only || poller.is_some())
        }
        // The operator reading a tenant's data sees no credential of its endpoints.
        Some(Principal::Inspector { .. }) => Some(true),
        _ => None,
    };
    Ok(match portal {
        Some(true) => true,
        Some(false) => {
            let conn = db::conn(&state.db).await?;
            !portals::get(&**conn, tenant).await?.show_header_values
        }
        None => false,
    })
}

/// `{"headers", "sensitive"}`: the endpoint's custom headers, sensitive ones by
/// name only; every one by name only when `names_only`.
pub(crate) fn headers_answer(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
    names_only: bool,
) -> Result<HttpResponse, ApiError> {
    let opened = secrets::open_headers(state, tenant, app, &ep.id, &ep.headers).map_err(ApiError::Internal)?;
    let all: BTreeMap<String, String> = serde_json::from_value(opened).unwrap_or_default();
    let (sensitive, shown): (BTreeMap<_, _>, BTreeMap<_, _>) =
        all.into_iter().partition(|(k, _)| names_only || SENSITIVE.contains(&k.to_ascii_lowercase().as_str()));
    Ok(HttpResponse::Ok().json(EndpointHeadersOut { headers: shown, sensitive: sensitive.into_keys().collect() }))
}

/// Replaces the endpoint's custom headers (checked by the caller), sealed; 204.
pub(crate) async fn store_headers(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    headers: &serde_json::Value,
) -> Result<HttpResponse, ApiError> {
    let sealed = secrets::seal_headers(state, tenant, app, ep, headers);
    let conn = db::conn(&state.db).await?;
    endpoints::set_headers(&**conn, tenant, app, ep, &sealed).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Replaces the endpoint's custom headers.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.update-headers", responses((status = 204, description = "saved")))]
#[put("/app/{app_id}/endpoint/{endpoint_id}/headers")]
async fn update_headers(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<HeadersIn>,
) -> Result<HttpResponse, ApiError> {
    check_headers(&body.headers)?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let headers: BTreeMap<&String, &String> = body.headers.iter().filter_map(|(k, v)| Some((k, v.as_ref()?))).collect();
    store_headers(&state, &tenant.0, &app, &ep.id, &json!(headers)).await
}

/// PATCH merges: a `null` value, or a name in `deleteHeaders`, removes that header.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.patch-headers", responses((status = 204, description = "saved")))]
#[patch("/app/{app_id}/endpoint/{endpoint_id}/headers")]
async fn patch_headers(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<HeadersIn>,
) -> Result<HttpResponse, ApiError> {
    check_headers(&body.headers)?;
    let (app, found) = find(&state, &tenant, &path.0, &path.1).await?;
    // Read, merged and written under the row's lock: a concurrent patch of other
    // headers is kept.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let ep =
        endpoints::get_for_update(&*tx, &tenant.0, &app, &found.id).await?.ok_or(ApiError::NotFound("endpoint"))?;
    let opened = secrets::open_headers(&state, &tenant.0, &app, &ep.id, &ep.headers).map_err(ApiError::Internal)?;
    let mut headers: BTreeMap<String, String> = serde_json::from_value(opened).unwrap_or_default();
    for (k, v) in &body.headers {
        match v {
            Some(v) => headers.insert(k.clone(), v.clone()),
            None => headers.remove(k),
        };
    }
    for k in &body.delete_headers {
        headers.retain(|name, _| !name.eq_ignore_ascii_case(k));
    }
    // The cap holds for what the endpoint ends with, not for one patch of it.
    if headers.len() > MAX_HEADERS {
        return Err(ApiError::Validation(format!("at most {MAX_HEADERS} custom headers per endpoint")));
    }
    let sealed = secrets::seal_headers(&state, &tenant.0, &app, &ep.id, &json!(headers));
    endpoints::set_headers(&*tx, &tenant.0, &app, &ep.id, &sealed).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::NoContent().finish())
}
