//! `/ingest/api/v1/source/{source}/endpoint`: an ingest source's endpoints, which
//! are the endpoints of its application, with what every endpoint has (retries,
//! attempts, throttle, SSRF guard, signing, custom headers).

use std::collections::{BTreeMap, HashMap};

use actix_web::{delete, get, post, put, web, HttpResponse};
use hookgate_shared::store::page::Page;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, SourceId, TenantId},
    store::{endpoints, ingest_sources},
    AppState,
};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::RequestKey;
use crate::v1::endpoint::crud::{allowed, insert, remove, save, EndpointIn, EndpointOut, NewEndpoint, Notify};
use crate::v1::endpoint::headers::{check_headers, headers_answer, store_headers, EndpointHeadersOut};
use crate::v1::endpoint::secret::{rotate, secret_answer, EndpointSecretOut, Rotated, Rotation};
use crate::v1::validate::RotateIn;
use crate::{optional_json, KeyAuth, PageQuery};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(upsert).service(delete_one);
    cfg.service(get_secret).service(rotate_secret).service(get_headers).service(set_headers);
}

/// An ingest source's endpoint to create or replace.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IngestEndpointIn {
    url: String,
    description: Option<String>,
    throttle_rate: Option<i64>,
    uid: Option<String>,
    disabled: Option<bool>,
    secret: Option<String>,
    metadata: Option<HashMap<String, String>>,
    /// Create only: custom headers sent with every request.
    headers: Option<HashMap<String, String>>,
}

impl IngestEndpointIn {
    fn endpoint_in(&self) -> EndpointIn {
        EndpointIn {
            url: self.url.clone(),
            uid: self.uid.clone(),
            description: self.description.clone().unwrap_or_default(),
            disabled: self.disabled.unwrap_or(false),
            // Everything the source admits goes to every one of its endpoints.
            event_types: None,
            channels: None,
            throttle_rate: self.throttle_rate,
            metadata: self.metadata.clone().unwrap_or_default(),
            secret: self.secret.clone(),
            headers: None,
            version: None,
            // Everything the source admits, whatever its content (Svix Ingest's shape).
            filter: crate::Maybe::Absent,
        }
    }
}

/// The application holding the ingest source's endpoints.
pub(super) async fn source_app(state: &AppState, tenant: &TenantId, source: &Ref<SourceId>) -> Result<AppId, ApiError> {
    let conn = db::conn(&state.db).await?;
    let s = ingest_sources::get(&**conn, tenant, source).await?.ok_or(ApiError::NotFound("ingest source"))?;
    Ok(s.app_id)
}

pub(super) async fn find(
    state: &AppState,
    tenant: &TenantId,
    source: &Ref<SourceId>,
    ep: &Ref<EndpointId>,
) -> Result<(AppId, endpoints::Endpoint), ApiError> {
    let app = source_app(state, tenant, source).await?;
    let conn = db::conn(&state.db).await?;
    // HTTP endpoints only: a destination has routes of its own.
    let found = endpoints::get(&**conn, tenant, &app, ep)
        .await?
        .filter(|e| !e.kind.is_destination())
        .ok_or(ApiError::NotFound("endpoint"))?;
    Ok((app, found))
}

/// Lists the source's endpoints.
#[utoipa::path(params(PageQuery), tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.list", responses((status = 200, body = Page<EndpointOut>)))]
#[get("/source/{source_id}/endpoint")]
async fn list(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<SourceId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = source_app(&state, &key.0, &path).await?;
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list_http(&**conn, &key.0, &app, &q.page::<EndpointId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(EndpointOut::from)))
}

/// The custom headers of a create, checked, as stored.
fn headers_of(b: &IngestEndpointIn) -> Result<Option<serde_json::Value>, ApiError> {
    b.headers.as_ref().map(crate::v1::validate::given_headers).transpose()
}

/// Creates an endpoint that receives everything the source admits.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.create", responses((status = 201, body = EndpointOut)))]
#[post("/source/{source_id}/endpoint")]
async fn create(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<SourceId>>,
    body: web::Json<IngestEndpointIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let fields = body.endpoint_in().fields(&allowed(&state, &key.0).await?)?;
    let headers = headers_of(&body)?;
    let app = source_app(&state, &key.0, &path).await?;
    let made = NewEndpoint { fields: &fields, secret: body.secret.as_deref(), headers };
    insert(&state, &key.0, &app, made, request.as_deref(), Notify::Yes).await
}

/// Gets one of the source's endpoints.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.get", responses((status = 200, body = EndpointOut)))]
#[get("/source/{source_id}/endpoint/{endpoint_id}")]
async fn get_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (_, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(ep)))
}

/// PUT: replaces the endpoint, or creates it with the path as its `uid` (201).
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.update", responses((status = 200, body = EndpointOut), (status = 201, description = "created under the path as its uid", body = EndpointOut)))]
#[put("/source/{source_id}/endpoint/{endpoint_id}")]
async fn upsert(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
    body: web::Json<IngestEndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = body.endpoint_in().fields(&allowed(&state, &key.0).await?)?;
    match find(&state, &key.0, &path.0, &path.1).await {
        Ok((app, ep)) => save(&state, &key.0, &app, &ep.id, &fields, Notify::Yes).await,
        Err(ApiError::NotFound("endpoint")) if path.1.creatable_uid().is_some() => {
            fields.uid = Some(fields.uid.unwrap_or_else(|| path.1.to_string()));
            let app = source_app(&state, &key.0, &path.0).await?;
            let made = NewEndpoint { fields: &fields, secret: body.secret.as_deref(), headers: headers_of(&body)? };
            insert(&state, &key.0, &app, made, None, Notify::Yes).await
        }
        Err(e) => Err(e),
    }
}

/// Deletes one of the source's endpoints.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.delete", responses((status = 204, description = "deleted")))]
#[delete("/source/{source_id}/endpoint/{endpoint_id}")]
async fn delete_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    remove(&state, &key.0, &app, &ep, Notify::Yes).await
}

/// Gets the endpoint's signing secret.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.get-secret", responses((status = 200, body = EndpointSecretOut)))]
#[get("/source/{source_id}/endpoint/{endpoint_id}/secret")]
async fn get_secret(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    secret_answer(&state, &key.0, &app, &ep)
}

/// Rotates the endpoint's signing secret: the old one keeps signing beside the
/// new one for the grace period (24 h by default).
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.rotate-secret", request_body = Option<RotateIn>, responses((status = 204, description = "rotated; the new key is read with `get-secret`")))]
#[post("/source/{source_id}/endpoint/{endpoint_id}/secret/rotate")]
async fn rotate_secret(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
    body: web::Bytes,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let rotation = Rotation::asked(&state, &optional_json::<RotateIn>(&body)?)?;
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    // The SDK's ingest rotation answers nothing (204); the new key is read with `get_secret`.
    rotate(&state, &key.0, &app, &ep.id, rotation, request.as_deref(), Rotated::NoContent).await
}

/// Gets the endpoint's custom headers; sensitive ones by name only.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.get-headers", responses((status = 200, body = EndpointHeadersOut)))]
#[get("/source/{source_id}/endpoint/{endpoint_id}/headers")]
async fn get_headers(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    headers_answer(&state, &key.0, &app, &ep, false)
}

/// The custom headers to send with every request, replacing the previous ones.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = IngestEndpointHeadersIn)]
struct HeadersIn {
    headers: HashMap<String, String>,
}

/// Replaces the endpoint's custom headers.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.update-headers", responses((status = 204, description = "saved")))]
#[put("/source/{source_id}/endpoint/{endpoint_id}/headers")]
async fn set_headers(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
    body: web::Json<HeadersIn>,
) -> Result<HttpResponse, ApiError> {
    let checked: HashMap<String, Option<String>> =
        body.headers.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect();
    check_headers(&checked)?;
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    store_headers(&state, &key.0, &app, &ep.id, &json!(body.headers.iter().collect::<BTreeMap<_, _>>())).await
}
