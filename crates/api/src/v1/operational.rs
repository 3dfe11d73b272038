//! `v1.operational-webhook.endpoint.*`: the endpoints that receive a tenant's
//! operational events (Svix's API, as its SDKs call it), and the same under
//! `/admin/v1` for the operator's, which receive every tenant's. They are the
//! endpoints of the tenant's hidden operational application
//! (`store::operational`), so they are signed, retried and logged as any.

use std::collections::{BTreeMap, HashMap};
use std::future::{ready, Ready};

use actix_web::dev::{AppService, HttpServiceFactory, Payload};
use actix_web::{delete, get, http::StatusCode, post, put, web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use hookgate_egress::secrets;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{endpoints, endpoints::Endpoint, operational, page::Page, tenants::OPERATOR, StoreError},
    AppState,
};
use serde::Deserialize;
use serde_json::json;
use utoipa::openapi::path::Paths;
use utoipa::ToSchema;
use utoipa_actix_web::{service_config::ServiceConfig, OpenApiFactory};

use super::endpoint::crud::{allowed, insert, remove, save, EndpointIn, EndpointOut, NewEndpoint, Notify};
use super::endpoint::headers::{check_headers, headers_answer, store_headers, EndpointHeadersOut};
use super::endpoint::secret::{rotated_secret, secret_answer, EndpointSecretOut};
use super::validate::RotateIn;
use crate::idempotency::{answer_empty, RequestKey};
use crate::{optional_json, PageQuery, Principal};

/// Registers the routes for `/api/v1`: a tenant's operational endpoints.
pub fn configure(cfg: &mut ServiceConfig) {
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

/// Registers the same routes for `/admin/v1` (the operator's operational
/// endpoints), their operations named `admin.…` and tagged `Admin`, so that
/// every operation id stays unique.
pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(Admin(list))
        .service(Admin(create))
        .service(Admin(get_one))
        .service(Admin(upsert))
        .service(Admin(delete_one))
        .service(Admin(get_secret))
        .service(Admin(rotate_secret))
        .service(Admin(get_headers))
        .service(Admin(set_headers));
}

/// A route registered a second time, for `/admin/v1`: served as is, described
/// with its operation id's `v1.` made `admin.` (`hookgate.` ones get
/// `hookgate.admin.`) and the tag `Admin`.
pub(crate) struct Admin<S>(pub(crate) S);

impl<S: HttpServiceFactory> HttpServiceFactory for Admin<S> {
    fn register(self, config: &mut AppService) {
        self.0.register(config)
    }
}

impl<S: OpenApiFactory> OpenApiFactory for Admin<S> {
    fn paths(&self) -> Paths {
        let mut paths = self.0.paths();
        for item in paths.paths.values_mut() {
            for op in
                [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch].into_iter().flatten()
            {
                op.operation_id = op.operation_id.as_deref().map(|id| match id.strip_prefix("hookgate.") {
                    Some(own) => format!("hookgate.admin.{own}"),
                    None => id.replacen("v1.", "admin.", 1),
                });
                op.tags = Some(vec!["Admin".to_owned()]);
            }
        }
        paths
    }

    fn schemas(&self, schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        self.0.schemas(schemas)
    }
}

/// Whose operational endpoints a request manages: a tenant's (with its API key;
/// not a portal token), or the operator's (with the admin token).
pub struct OpTenant(pub(crate) TenantId);

impl FromRequest for OpTenant {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match req.extensions().get::<Principal>() {
            Some(Principal::Tenant { tenant, .. }) | Some(Principal::Inspector { tenant }) => {
                Ok(OpTenant(tenant.clone()))
            }
            Some(Principal::Operator) => Ok(OpTenant(TenantId::from_db(OPERATOR.to_owned()))),
            Some(Principal::Portal { .. }) => Err(ApiError::Forbidden("an app-portal token cannot do this".into())),
            None => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}

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

/// An operational endpoint to create: an endpoint's fields, and its custom headers.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = OperationalWebhookEndpointIn)]
struct OpEndpointIn {
    #[serde(flatten)]
    endpoint: EndpointIn,
    headers: Option<HashMap<String, String>>,
}

/// The operational endpoints (none until the first is created).
#[utoipa::path(params(PageQuery), tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.list", responses((status = 200, body = Page<EndpointOut>)))]
#[get("/operational-webhook/endpoint")]
async fn list(who: OpTenant, state: web::Data<AppState>, q: web::Query<PageQuery>) -> Result<HttpResponse, ApiError> {
    let Some(app) = op_app(&state, &who.0).await? else {
        let none: Page<EndpointOut> = Page { data: Vec::new(), iterator: None, prev_iterator: None, done: true };
        return Ok(HttpResponse::Ok().json(none));
    };
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list_http(&**conn, &who.0, &app, &q.page::<EndpointId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(EndpointOut::from)))
}

/// Creates an operational endpoint.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.create", responses((status = 201, body = EndpointOut)))]
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

/// One operational endpoint.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.get", responses((status = 200, body = EndpointOut)))]
#[get("/operational-webhook/endpoint/{endpoint_id}")]
async fn get_one(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
) -> Result<HttpResponse, ApiError> {
    let (_, ep) = find(&state, &who.0, &path).await?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(ep)))
}

/// PUT: replaces the endpoint, or creates it with the path as its `uid`.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.update", responses((status = 200, body = EndpointOut), (status = 201, description = "created under the path as its uid", body = EndpointOut)))]
#[put("/operational-webhook/endpoint/{endpoint_id}")]
async fn upsert(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
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

/// Deletes an operational endpoint.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.delete", responses((status = 204, description = "deleted")))]
#[delete("/operational-webhook/endpoint/{endpoint_id}")]
async fn delete_one(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    remove(&state, &who.0, &app, &ep, Notify::No).await
}

/// The operational endpoint's signing secret.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.get-secret", responses((status = 200, body = EndpointSecretOut)))]
#[get("/operational-webhook/endpoint/{endpoint_id}/secret")]
async fn get_secret(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    secret_answer(&state, &who.0, &app, &ep)
}

/// The old secret keeps signing beside the new one for the grace period; 204 as Svix answers.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.rotate-secret", request_body = Option<RotateIn>, responses((status = 204, description = "rotated")))]
#[post("/operational-webhook/endpoint/{endpoint_id}/secret/rotate")]
async fn rotate_secret(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body: RotateIn = optional_json(&body)?;
    let until = body.old_secret_until()?;
    let secret = rotated_secret(&state, &body)?;
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

/// The operational endpoint's custom headers, sensitive ones by name only.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.get-headers", responses((status = 200, body = EndpointHeadersOut)))]
#[get("/operational-webhook/endpoint/{endpoint_id}/headers")]
async fn get_headers(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &who.0, &path).await?;
    headers_answer(&state, &who.0, &app, &ep, false)
}

/// The custom headers, replacing all the endpoint had.
#[derive(Deserialize, ToSchema)]
#[schema(as = OperationalWebhookEndpointHeadersIn)]
struct HeadersIn {
    headers: HashMap<String, String>,
}

/// Replaces the operational endpoint's custom headers.
#[utoipa::path(tag = "Webhook Endpoint", operation_id = "v1.operational-webhook.endpoint.update-headers", responses((status = 204, description = "saved")))]
#[put("/operational-webhook/endpoint/{endpoint_id}/headers")]
async fn set_headers(
    who: OpTenant,
    state: web::Data<AppState>,
    path: web::Path<Ref<EndpointId>>,
    body: web::Json<HeadersIn>,
) -> Result<HttpResponse, ApiError> {
    check_headers(&body.headers.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())?;
    let (app, ep) = find(&state, &who.0, &path).await?;
    let headers: BTreeMap<&String, &String> = body.headers.iter().collect();
    store_headers(&state, &who.0, &app, &ep.id, &json!(headers)).await
}
