//! `v1.endpoint.*` beyond CRUD: secret get and rotate, headers, stats.

use hookgate_shared::ids::{AppId, EndpointId, Ref, TenantId};
use hookgate_shared::status::DeliveryStatus;
use hookgate_shared::store::endpoints::Endpoint;
use std::collections::{BTreeMap, HashMap};

use crate::idempotency::{answer, answer_empty, RequestKey};
use crate::{optional_json, when::Window, Principal, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{get, patch, post, put, web, HttpMessage, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::StoreError;
use hookgate_shared::{
    db,
    http::ApiError,
    store::{attempts, deliveries, endpoints, portals},
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::endpoints::{find, Notify};
use super::validate::RotateIn;
use hookgate_egress::{secrets, signing::EndpointSecret};
use hookgate_shared::store::operational::Notice;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_secret)
        .service(rotate_secret)
        .service(get_headers)
        .service(update_headers)
        .service(patch_headers)
        .service(stats);
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// An endpoint's signing secret, or the public key that verifies its signatures.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndpointSecretOut {
    /// `whsec_` and the HMAC secret, base64; for an Ed25519 (`whsk_`) secret,
    /// `whpk_` and its 32-byte public key, base64 (the secret key is never shown).
    key: String,
}

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

/// An endpoint's deliveries (a FIFO endpoint's messages) by status.
#[derive(Serialize, ToSchema)]
struct EndpointStats {
    canceled: i64,
    fail: i64,
    pending: i64,
    sending: i64,
    success: i64,
}

/// The endpoint's signing secret.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-secret", responses((status = 200, body = EndpointSecretOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/secret")]
async fn get_secret(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    secret_answer(&state, &tenant.0, &app, &ep)
}

/// `{"key": …}`: the endpoint's signing secret, opened, or its public key.
pub(crate) fn secret_answer(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
) -> Result<HttpResponse, ApiError> {
    let secret = secrets::open_secret(state, tenant, app, &ep.id, &ep.secret)
        .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?;
    Ok(HttpResponse::Ok().json(EndpointSecretOut { key: secret.shown() }))
}

/// The secret a rotation sets: the body's key (422 saying what is wrong with
/// it), or a new one of the operator's default kind.
pub(crate) fn rotated_secret(state: &AppState, body: &RotateIn) -> Result<EndpointSecret, ApiError> {
    EndpointSecret::given_or_new(body.key.as_deref(), state.config.default_signature_type)
        .map_err(|e| ApiError::Validation(e.to_string()))
}

/// The old secret keeps signing, beside the new one, for the grace period (24 h by default).
/// Answers 200 with the new key (an Ed25519 key's `whpk_` public key): current Svix SDKs parse a body here.
#[utoipa::path(
    tag = "Endpoint",
    operation_id = "v1.endpoint.rotate-secret",
    request_body(content = Option<RotateIn>, description = "optional: an empty body rotates to a new key"),
    responses((status = 200, body = EndpointSecretOut))
)]
#[post("/app/{app_id}/endpoint/{endpoint_id}/secret/rotate")]
async fn rotate_secret(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let rotation = Rotation::asked(&state, &optional_json(&body)?)?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    rotate(&state, &tenant.0, &app, &ep.id, rotation, key.as_deref(), Rotated::ShowKey).await
}

/// What a rotation answers: the new key (200, as current Svix SDKs parse), or
/// nothing (204, as the ingest API does).
pub(crate) enum Rotated {
    ShowKey,
    NoContent,
}

/// A rotation's body, checked (before the endpoint is looked up): the new secret
/// and until when the old one signs beside it.
pub(crate) struct Rotation {
    secret: EndpointSecret,
    until: DateTime<Utc>,
}

impl Rotation {
    pub(crate) fn asked(state: &AppState, body: &RotateIn) -> Result<Rotation, ApiError> {
        Ok(Rotation { until: body.old_secret_until()?, secret: rotated_secret(state, body)? })
    }
}

/// Rotates an endpoint's secret, with its `endpoint.updated` notice and the
/// answer under the request's key in the same commit.
pub(crate) async fn rotate(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    Rotation { secret, until }: Rotation,
    key: Option<&RequestKey>,
    answered: Rotated,
) -> Result<HttpResponse, ApiError> {
    let sealed = secrets::seal(state, tenant, app, ep, &secret);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !endpoints::rotate_secret(&*tx, tenant, app, ep, &sealed, until).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    // Svix tells a rotation as `endpoint.updated`.
    let notice = Notice::endpoint(tenant, "endpoint.updated", app, ep);
    let woke = super::endpoint_rows::notice(&*tx, Notify::Yes, notice).await?;
    let res = match answered {
        Rotated::ShowKey => {
            answer(&*tx, state, key, StatusCode::OK, &EndpointSecretOut { key: secret.shown() }).await?
        }
        Rotated::NoContent => answer_empty(&*tx, state, key, StatusCode::NO_CONTENT).await?,
    };
    super::endpoint_rows::commit(tx, state, woke).await?;
    Ok(res)
}

pub(crate) use super::validate::headers as check_headers;
use super::validate::MAX_HEADERS;
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

/// The endpoint's (or a destination's) deliveries by status, within `since` and `until`.
#[utoipa::path(params(Window), tag = "Endpoint", operation_id = "v1.endpoint.get-stats", responses((status = 200, body = EndpointStats)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/stats")]
async fn stats(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    q: web::Query<Window>,
) -> Result<HttpResponse, ApiError> {
    // A destination's too (its deliveries are counted alike).
    let (app, ep) = super::endpoints::find_any(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    // A FIFO endpoint sends batches and makes no deliveries: its messages are
    // counted by their attempts (one per message of each batch) instead.
    // Within 31 days (the last 31 unless `since` says otherwise): each retry
    // adds an attempt per message of its batch.
    if ep.kind == hookgate_shared::status::EndpointKind::FifoEndpoint {
        let until = q.until.unwrap_or_else(chrono::Utc::now);
        let since = q.since.unwrap_or(until - chrono::Duration::days(31));
        if since >= until || until - since > chrono::Duration::days(31) {
            return Err(ApiError::Validation(
                "a FIFO endpoint's stats: `since` must be before `until`, at most 31 days apart".into(),
            ));
        }
        let (success, fail) = attempts::per_message(&**conn, &tenant.0, &app, &ep.id, Some(since), Some(until)).await?;
        return Ok(HttpResponse::Ok().json(EndpointStats { canceled: 0, fail, pending: 0, sending: 0, success }));
    }
    let counts = deliveries::stats(&**conn, &tenant.0, &app, &ep.id, q.since, q.until).await?;
    let n = |s| counts.get(&s).copied().unwrap_or(0);
    Ok(HttpResponse::Ok().json(EndpointStats {
        canceled: n(DeliveryStatus::Canceled),
        fail: n(DeliveryStatus::Failed),
        pending: n(DeliveryStatus::Pending),
        sending: n(DeliveryStatus::Sending),
        success: n(DeliveryStatus::Success),
    }))
}
