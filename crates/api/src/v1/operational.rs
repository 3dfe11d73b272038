//! `v1.operational-webhook.endpoint.*`: the endpoints that receive a tenant's
//! operational events (Svix's API, as its SDKs call it), and the same under
//! `/admin/v1` for the operator's, which receive every tenant's. They are the
//! endpoints of the tenant's hidden operational application
//! (`store::operational`), so they are signed, retried and logged as any.

use std::collections::{BTreeMap, HashMap};
use std::future::{ready, Ready};

use actix_web::{
    delete, dev::Payload, get, http::StatusCode, post, put, web, FromRequest, HttpMessage, HttpRequest, HttpResponse,
};
use hookgate_egress::secrets;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{endpoints, endpoints::Endpoint, operational, tenants::OPERATOR, StoreError},
    AppState,
};
use serde::Deserialize;
use serde_json::json;

use super::endpoint_extras::{check_headers, headers_answer, rotated_secret, secret_answer, store_headers};
use super::endpoints::{allowed, insert, remove, save, EndpointIn, EndpointOut, NewEndpoint, Notify};
use super::validate::RotateIn;
use crate::idempotency::{answer_empty, RequestKey};
use crate::{optional_json, PageQuery, Principal};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get_one)
        .service(upsert)
        .service(delete_one)
        .service(get_secret)
        .service(rotate_secret)
        .service(get_headers)
        .service(set_headers);
}

/// Whose operational endpoints a request manages: a tenant's (with its API key;
/// not a portal token), or the operator's (with the admin token).
pub struct OpTenant(TenantId);

impl FromRequest for OpTenant {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match req.extensions().get::<Principal>() {
            Some(Principal::Tenant { tenant, .. }) => Ok(OpTenant(tenant.clone())),
            Some(Principal::Operator) => Ok(OpTenant(TenantId::from_db(OPERATOR.to_owned()))),
            Some(Principal::Portal { .. }) => Err(ApiError::Forbidden("an app-portal token cannot do this".into())),
            None => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}

type EpPath = web::Path<Ref<EndpointId>>;

async fn op_app(state: &AppState, tenant: &TenantId) -> Result<Option<AppId>, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(operational::app(&**conn, tenant).await?)
}

/// The tenant's operational application, made now if it has none.
async fn made_op_app(state: &AppState, tenant: &TenantId) -> Result<AppId, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(operational::ensure_app(&**conn, tenant).await?)
}

async fn find(state: &AppState, tenant: &TenantId, ep: &Ref<EndpointId>) -> Result<(AppId, Endpoint), ApiError> {
    let app = op_app(state, tenant).await?.ok_or(ApiError::NotFound("endpoint"))?;
    let conn = db::conn(&state.db).await?;
    // HTTP endpoints only: a destination has routes of its own.
    let found = endpoints::get(&**conn, tenant, &app, ep)
        .await?
        .filter(|e| !e.kind.is_destination())
        .ok_or(ApiError::NotFound("endpoint"))?;
    Ok((app, found))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OpEndpointIn {
    #[serde(flatten)]
    endpoint: EndpointIn,
    headers: Option<HashMap<String, String>>,
}

#[get("/operational-webhook/endpoint")]
async fn list(who: OpTenant, state: web::Data<AppState>, q: web::Query<PageQuery>) -> Result<HttpResponse, ApiError> {
    let Some(app) = op_app(&state, &who.0).await? else {
        return Ok(HttpResponse::Ok().json(json!({ "data": [], "iterator": null, "prevIterator": null, "done": true })));
    };
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list(&**conn, &who.0, &app, false, &q.page()).await?;
    Ok(HttpResponse::Ok().json(page.map(EndpointOut::from)))
}

#[post("/operational-webhook/endpoint")]
async fn create(
    who: OpTenant,
    state: web::Data<AppState>,
    body: web::Json<OpEndpointIn>,
    key: Option<web::ReqData<crate::idempotency::RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let fields = body.endpoint.fields(&allowed(&state, &who.0).await?)?;
    let headers = match body.headers {
        Some(h) => {
            check_headers(&h.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())?;
            Some(json!(h.into_iter().collect::<BTreeMap<_, _>>()))
        }
        None => None,
    };
    let app = made_op_app(&state, &who.0).await?;
    let made = NewEndpoint { fields: &fields, secret: body.endpoint.secret.as_deref(), headers };
    insert(&state, &who.0, &app, made, key.as_deref(), Notify::No).await
}

#[get("/operational-webhook/endpoint/{endpoint_id}")]
async fn get_one(who: OpTenant, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (_, ep) = find(&state, &who.0, &path).await?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(ep)))
}

/// PUT: replaces the endpoint, or creates it with the path as its `uid`.
#[put("/operational-webhook/endpoint/{endpoint_id}")]
async fn upsert(
    who: OpTenant,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = body.fields(&allowed(&state, &who.0).await?)?;
    match find(&state, &who.0, &path).await {
        Ok((app, ep)) => save(&state, &who.0, &app, &ep.id, &fields, Notify::No).await,
        Err(ApiError::NotFound(_)) if path.creatable_uid().is_some() => {
            fields.uid = Some(fields.uid.unwrap_or_else(|| path.to_string()));
            let app = made_op_app(&state, &who.0).await?;
            let made = NewEndpoint { fields: &fields, secret: body.secret.as_deref(), headers: None };
            insert(&state, &who.0, &app, made, None, Notify::No).await
        }
        Err(e) => Err(e),
    }
}

#[delete("/operational-webhook/endpoint/{endpoint_id}")]
async fn delete_one(who: OpTenant, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    remove(&state, &who.0, &app, &ep, Notify::No).await
}

#[get("/operational-webhook/endpoint/{endpoint_id}/secret")]
async fn get_secret(who: OpTenant, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    secret_answer(&state, &who.0, &app, &ep)
}

/// The old secret keeps signing beside the new one for the grace period; 204 as Svix answers.
#[post("/operational-webhook/endpoint/{endpoint_id}/secret/rotate")]
async fn rotate_secret(
    who: OpTenant,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body: RotateIn = optional_json(&body)?;
    let until = body.old_secret_until()?;
    let secret = rotated_secret(&body)?;
    let (app, ep) = find(&state, &who.0, &path).await?;
    let sealed = secrets::seal(&state, &who.0, &app, &ep.id, &secret);
    // The rotation and its `Idempotency-Key` answer commit together: a retry
    // after a lost answer replays the 204 and never rotates a second time.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !endpoints::rotate_secret(&*tx, &who.0, &app, &ep.id, &sealed, until).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    let res = answer_empty(&*tx, &state, key.as_deref(), StatusCode::NO_CONTENT).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

#[get("/operational-webhook/endpoint/{endpoint_id}/headers")]
async fn get_headers(who: OpTenant, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    headers_answer(&state, &who.0, &app, &ep, false)
}

#[derive(Deserialize)]
struct HeadersIn {
    headers: HashMap<String, String>,
}

#[put("/operational-webhook/endpoint/{endpoint_id}/headers")]
async fn set_headers(
    who: OpTenant,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<HeadersIn>,
) -> Result<HttpResponse, ApiError> {
    check_headers(&body.headers.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())?;
    let (app, ep) = find(&state, &who.0, &path).await?;
    let headers: BTreeMap<&String, &String> = body.headers.iter().collect();
    store_headers(&state, &who.0, &app, &ep.id, &json!(headers)).await
}
