//! `v1.endpoint.*` CRUD: list, create, get, update (PUT), patch, delete.

use std::collections::HashMap;

use crate::idempotency::{answer, RequestKey};
use crate::{FeatureFlags, Maybe, PageQuery, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{
        endpoints::{self, Endpoint, EndpointFields},
        operational::Notice,
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};

pub(crate) use crate::v1::endpoint::rows::Notify;
use crate::v1::endpoint::rows::{commit, endpoints_cap, notice, room_for_one_more};
use crate::v1::{applications, validate};
use hookgate_egress::{secrets, signing::EndpointSecret, ssrf::Guard};
use hookgate_shared::store::page::Page;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(patch_one).service(delete_one);
}

/// An endpoint to create, or to replace with (PUT).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndpointIn {
    pub(crate) url: String,
    pub(crate) uid: Option<String>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub(crate) description: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub(crate) disabled: bool,
    #[serde(alias = "filterTypes")]
    pub(crate) event_types: Option<Vec<String>>,
    pub(crate) channels: Option<Vec<String>>,
    #[serde(alias = "rateLimit")]
    pub(crate) throttle_rate: Option<i64>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub(crate) metadata: HashMap<String, String>,
    pub(crate) secret: Option<String>,
    /// Create only (as Svix's `EndpointIn`): custom headers sent with every request.
    #[serde(default)]
    pub(crate) headers: Option<HashMap<String, String>>,
    /// Hookgate's: a content filter over the payload (`amount > 100 and
    /// currency == "EUR"`); a message it refuses makes no delivery (docs/sending.md).
    /// Absent from a PUT, the stored one stays (Svix's SDKs send no such field);
    /// `null` removes it.
    #[serde(default)]
    pub(crate) filter: Maybe<String>,
    /// Svix accepts a version number; it is stored but has no effect.
    #[allow(dead_code)]
    pub(crate) version: Option<i64>,
}

/// The fields a PATCH changes: absent ones are kept, `null` clears a nullable one.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointPatch {
    url: Option<String>,
    #[serde(default)]
    uid: Maybe<String>,
    description: Option<String>,
    disabled: Option<bool>,
    #[serde(default, alias = "filterTypes")]
    event_types: Maybe<Vec<String>>,
    #[serde(default)]
    channels: Maybe<Vec<String>>,
    #[serde(default, alias = "rateLimit")]
    throttle_rate: Maybe<i64>,
    metadata: Option<HashMap<String, String>>,
    /// `null` removes the content filter.
    #[serde(default)]
    filter: Maybe<String>,
}

/// An HTTP endpoint, as Svix's `EndpointOut`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndpointOut {
    pub id: String,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub version: i32,
    pub disabled: bool,
    pub event_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    pub throttle_rate: Option<i32>,
    /// `throttleRate` under its deprecated name, which Svix still answers.
    #[schema(deprecated)]
    pub rate_limit: Option<i32>,
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Hookgate's content filter, as given; absent when the endpoint has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl From<Endpoint> for EndpointOut {
    fn from(e: Endpoint) -> Self {
        EndpointOut {
            id: e.id.to_string(),
            uid: e.uid,
            url: e.url,
            description: e.description,
            version: e.version,
            disabled: e.disabled,
            event_types: e.event_types,
            channels: e.channels,
            throttle_rate: e.throttle_rate,
            rate_limit: e.throttle_rate,
            metadata: e.metadata,
            created_at: e.created_at,
            updated_at: e.updated_at,
            filter: e.filter,
        }
    }
}

/// What the tenant's endpoints may reach: the networks the operator opened and
/// its own, never Hookgate's own database or Redis (resolved afresh if due).
pub(crate) async fn allowed(state: &AppState, tenant: &TenantId) -> Result<Guard, ApiError> {
    let allow = hookgate_shared::networks::allowed(state, tenant).await?;
    let guard = Guard::new(allow.to_vec()).protecting(state.own_services.clone());
    guard.refresh_own().await;
    Ok(guard)
}

/// An endpoint URL: absolute http(s), and not aimed at a blocked address (`guard`:
/// what the tenant may reach, from [`allowed`]).
pub(crate) fn check_url(guard: &Guard, raw: &str) -> Result<(), ApiError> {
    let url = url::Url::parse(raw).map_err(|e| ApiError::Validation(format!("`url` is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(ApiError::Validation("`url` must be an absolute http or https URL".into()));
    }
    guard.check_url(&url).map_err(|b| ApiError::Validation(format!("`url` is refused: {b}")))
}

pub(crate) fn check_list(field: &str, items: &Option<Vec<String>>, max: usize) -> Result<(), ApiError> {
    if let Some(items) = items {
        if items.is_empty() || items.len() > max {
            return Err(ApiError::Validation(format!("`{field}` must hold 1 to {max} items, or be null")));
        }
        for i in items {
            validate::uid(field, i)?;
        }
    }
    Ok(())
}

impl EndpointIn {
    /// The custom headers of a create, checked as `…/headers` checks them.
    pub(crate) fn checked_headers(&self) -> Result<Option<serde_json::Value>, ApiError> {
        self.headers.as_ref().map(validate::given_headers).transpose()
    }

    pub(crate) fn fields(&self, guard: &Guard) -> Result<EndpointFields, ApiError> {
        check_url(guard, &self.url)?;
        if let Some(uid) = &self.uid {
            validate::uid("uid", uid)?;
        }
        check_list("eventTypes", &self.event_types, 1000)?;
        check_list("channels", &self.channels, 10)?;
        Ok(EndpointFields {
            uid: self.uid.clone(),
            url: self.url.clone(),
            description: self.description.clone(),
            disabled: self.disabled,
            event_types: self.event_types.clone(),
            channels: self.channels.clone(),
            throttle_rate: validate::throttle_rate(self.throttle_rate)?,
            metadata: serde_json::to_value(&self.metadata).expect("a string map serialises"),
            filter: validate::filter(self.filter.value().map(String::as_str))?,
        })
    }
}

/// Finds the application, then the HTTP endpoint in it; 404 for either missing
/// (and for a destination: its configuration has routes of its own).
pub(crate) async fn find(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    endpoint: &Ref<EndpointId>,
) -> Result<(AppId, Endpoint), ApiError> {
    let (app, ep) = find_any(state, tenant, app, endpoint).await?;
    match ep.kind.is_destination() {
        true => Err(ApiError::NotFound("endpoint")),
        false => Ok((app, ep)),
    }
}

/// Refuses what only deliveries have (resend, replays) for a FIFO or polling
/// endpoint, which reads its messages in order from its log.
pub(crate) fn has_deliveries(ep: &Endpoint) -> Result<(), ApiError> {
    match ep.kind.is_sink() {
        true => Err(ApiError::Conflict(format!(
            "a {} reads its messages in order from its log, which takes every message it subscribes to, \
             even while it is disabled: it has no deliveries to resend or replay",
            ep.kind.type_name().unwrap_or_default()
        ))),
        false => Ok(()),
    }
}

/// [`find`], or a destination: for what both have alike (attempts, stats,
/// replays), which take a destination's id where they take an endpoint's.
pub(crate) async fn find_any(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    endpoint: &Ref<EndpointId>,
) -> Result<(AppId, Endpoint), ApiError> {
    let app = applications::find(state, tenant, app).await?;
    let conn = db::conn(&state.db).await?;
    let ep = endpoints::get(&**conn, &tenant.0, &app.id, endpoint).await?.ok_or(ApiError::NotFound("endpoint"))?;
    Ok((app.id, ep))
}

/// The application's HTTP endpoints (destinations are listed apart).
#[utoipa::path(params(PageQuery), tag = "Endpoint", operation_id = "v1.endpoint.list", responses((status = 200, body = Page<EndpointOut>)))]
#[get("/app/{app_id}/endpoint")]
async fn list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = applications::find(&state, &tenant, &path).await?;
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list_http(&**conn, &tenant.0, &app.id, &q.page::<EndpointId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(EndpointOut::from)))
}

/// Creates an endpoint, with the secret given or a new one.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.create", responses((status = 201, body = EndpointOut)))]
#[post("/app/{app_id}/endpoint")]
async fn create(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<EndpointIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let fields = body.fields(&allowed(&state, &tenant.0).await?)?;
    let headers = body.checked_headers()?;
    let app = applications::find(&state, &tenant, &path).await?;
    validate::types_exist(&**db::conn(&state.db).await?, &tenant.0, &flags, fields.event_types.as_deref()).await?;
    let made = NewEndpoint { fields: &fields, secret: body.secret.as_deref(), headers };
    insert(&state, &tenant.0, &app.id, made, key.as_deref(), Notify::Yes).await
}

/// An endpoint to create: its fields, its secret if the caller chose one, and
/// custom headers (already checked) if it comes with some.
pub(crate) struct NewEndpoint<'a> {
    pub fields: &'a EndpointFields,
    pub secret: Option<&'a str>,
    pub headers: Option<serde_json::Value>,
}

/// Creates an endpoint in `app` (found by the caller), within the tenant's
/// `endpointsPerApp` quota, with its `endpoint.created` notice in the same commit.
pub(crate) async fn insert(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    made: NewEndpoint<'_>,
    key: Option<&RequestKey>,
    notify: Notify,
) -> Result<HttpResponse, ApiError> {
    // The secret given (`whsec_…` or `whsk_…`; 422 saying what is wrong with it),
    // or a new one of the operator's default kind.
    let secret = EndpointSecret::given_or_new(made.secret, state.config.default_signature_type)
        .map_err(|e| ApiError::Validation(e.to_string()))?;
    let id = EndpointId::generate();
    let sealed = secrets::seal(state, tenant, app, &id, &secret);
    let cap = endpoints_cap(state, tenant).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    room_for_one_more(&*tx, state, tenant, app, cap).await?;
    let mut ep = endpoints::insert(&*tx, tenant, app, &id, made.fields, &sealed)
        .await
        .map_err(|e| validate::conflict("an endpoint with this uid")(e.into()))?;
    if let Some(headers) = made.headers {
        let sealed = secrets::seal_headers(state, tenant, app, &id, &headers);
        endpoints::set_headers(&*tx, tenant, app, &id, &sealed).await?;
        ep.headers = sealed;
    }
    let woke = notice(&*tx, notify, Notice::endpoint(tenant, "endpoint.created", app, &id)).await?;
    let res = answer(&*tx, state, key, StatusCode::CREATED, &EndpointOut::from(ep)).await?;
    commit(tx, state, woke).await?;
    Ok(res)
}

/// The endpoint, by id or uid.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get", responses((status = 200, body = EndpointOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}")]
async fn get_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (_, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(ep)))
}

/// PUT: replaces the endpoint, or creates it with the path as its `uid` (201).
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.update", responses((status = 200, body = EndpointOut), (status = 201, description = "created under the path as its uid", body = EndpointOut)))]
#[put("/app/{app_id}/endpoint/{endpoint_id}")]
async fn update(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = body.fields(&allowed(&state, &tenant.0).await?)?;
    match find(&state, &tenant, &path.0, &path.1).await {
        Ok((app, ep)) => {
            let added = validate::added_types(fields.event_types.as_deref(), ep.event_types.as_deref());
            validate::types_exist(&**db::conn(&state.db).await?, &tenant.0, &flags, added.as_deref()).await?;
            if body.filter == Maybe::Absent {
                fields.filter = validate::filter(ep.filter.as_deref())?;
            }
            save(&state, &tenant.0, &app, &ep.id, &fields, Notify::Yes).await
        }
        Err(ApiError::NotFound("endpoint")) if path.1.creatable_uid().is_some() => {
            validate::types_exist(&**db::conn(&state.db).await?, &tenant.0, &flags, fields.event_types.as_deref())
                .await?;
            fields.uid = Some(fields.uid.unwrap_or_else(|| path.1.to_string()));
            let app = applications::find(&state, &tenant, &path.0).await?;
            let headers = body.checked_headers()?;
            let made = NewEndpoint { fields: &fields, secret: body.secret.as_deref(), headers };
            insert(&state, &tenant.0, &app.id, made, None, Notify::Yes).await
        }
        Err(e) => Err(e),
    }
}

/// Changes the fields the body names and keeps the others.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.patch", responses((status = 200, body = EndpointOut)))]
#[patch("/app/{app_id}/endpoint/{endpoint_id}")]
async fn patch_one(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<EndpointPatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    let (app, found) = find(&state, &tenant, &path.0, &path.1).await?;
    let allow = allowed(&state, &tenant.0).await?;
    if let Maybe::Value(types) = &p.event_types {
        let added = validate::added_types(Some(types), found.event_types.as_deref());
        validate::types_exist(&**db::conn(&state.db).await?, &tenant.0, &flags, added.as_deref()).await?;
    }
    // Read, merged and written under the row's lock: fields the PATCH does not
    // name keep what they hold at its commit, not what they held when it started.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let ep =
        endpoints::get_for_update(&*tx, &tenant.0, &app, &found.id).await?.ok_or(ApiError::NotFound("endpoint"))?;
    let merged = EndpointIn {
        url: p.url.unwrap_or(ep.url),
        uid: p.uid.into_update().unwrap_or(ep.uid),
        description: p.description.unwrap_or(ep.description),
        disabled: p.disabled.unwrap_or(ep.disabled),
        event_types: p.event_types.into_update().unwrap_or(ep.event_types),
        channels: p.channels.into_update().unwrap_or(ep.channels),
        throttle_rate: p.throttle_rate.into_update().unwrap_or(ep.throttle_rate.map(i64::from)),
        metadata: p.metadata.unwrap_or_else(|| serde_json::from_value(ep.metadata).unwrap_or_default()),
        secret: None,
        headers: None,
        version: None,
        filter: p.filter.into_update().unwrap_or(ep.filter).map_or(Maybe::Null, Maybe::Value),
    };
    save_in(tx, &state, &tenant.0, &app, &ep.id, &merged.fields(&allow)?, Notify::Yes).await
}

/// Replaces an endpoint's fields, with its `endpoint.updated` notice in the same commit.
pub(crate) async fn save(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    fields: &EndpointFields,
    notify: Notify,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    save_in(tx, state, tenant, app, id, fields, notify).await
}

/// [`save`], in a transaction the caller began (and may hold the row's lock in).
async fn save_in(
    tx: db::Transaction<'_>,
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    fields: &EndpointFields,
    notify: Notify,
) -> Result<HttpResponse, ApiError> {
    let saved = endpoints::replace(&*tx, tenant, app, id, fields)
        .await
        .map_err(|e| validate::conflict("an endpoint with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("endpoint"))?;
    let woke = notice(&*tx, notify, Notice::endpoint(tenant, "endpoint.updated", app, id)).await?;
    commit(tx, state, woke).await?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(saved)))
}

/// Deletes the endpoint.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.delete", responses((status = 204, description = "deleted")))]
#[delete("/app/{app_id}/endpoint/{endpoint_id}")]
async fn delete_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    remove(&state, &tenant.0, &app, &ep, Notify::Yes).await
}

/// Deletes an endpoint, with its `endpoint.deleted` notice (carrying the uid it
/// had) in the same commit.
pub(crate) async fn remove(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
    notify: Notify,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let mut n = Notice::endpoint(tenant, "endpoint.deleted", app, &ep.id);
    n.endpoint_uid = ep.uid.clone();
    // Written first: the payload is built while the endpoint's row still exists.
    let woke = notice(&*tx, notify, n).await?;
    if !endpoints::delete(&*tx, tenant, app, &ep.id).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    commit(tx, state, woke).await?;
    Ok(HttpResponse::NoContent().finish())
}
