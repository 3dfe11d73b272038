//! `v1.endpoint.*` CRUD: list, create, get, update (PUT), patch, delete.

use std::collections::HashMap;

use crate::idempotency::{answer, RequestKey};
use crate::{Maybe, PageQuery, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    store::{
        endpoints::{self, Endpoint, EndpointFields},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};

use super::{applications, validate};
use hookgate_egress::{secrets, signing, ssrf::Guard};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(patch_one).service(delete_one);
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndpointIn {
    url: String,
    uid: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    disabled: bool,
    #[serde(alias = "filterTypes")]
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    #[serde(alias = "rateLimit")]
    throttle_rate: Option<i64>,
    #[serde(default)]
    metadata: HashMap<String, String>,
    secret: Option<String>,
    /// Svix accepts a version number; it is stored but has no effect.
    #[allow(dead_code)]
    version: Option<i64>,
}

#[derive(Deserialize)]
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
}

#[derive(Serialize)]
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
    pub metadata: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
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
            metadata: e.metadata,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// An endpoint URL: absolute http(s), and not aimed at a blocked address.
pub(crate) fn check_url(state: &AppState, raw: &str) -> Result<(), ApiError> {
    let url = url::Url::parse(raw).map_err(|e| ApiError::Validation(format!("`url` is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(ApiError::Validation("`url` must be an absolute http or https URL".into()));
    }
    Guard::new(state.config.egress_allow_networks.clone())
        .check_url(&url)
        .map_err(|b| ApiError::Validation(format!("`url` is refused: {b}")))
}

fn check_list(field: &str, items: &Option<Vec<String>>, max: usize) -> Result<(), ApiError> {
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
    fn fields(&self, state: &AppState) -> Result<EndpointFields, ApiError> {
        check_url(state, &self.url)?;
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
        })
    }
}

/// Finds the application, then the endpoint in it; 404 for either missing.
pub(crate) async fn find(
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

#[get("/app/{app_id}/endpoint")]
async fn list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = applications::find(&state, &tenant, &path).await?;
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list(&**conn, &tenant.0, &app.id, &q.page()).await?;
    Ok(HttpResponse::Ok().json(page.map(EndpointOut::from)))
}

#[post("/app/{app_id}/endpoint")]
async fn create(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<EndpointIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let fields = body.fields(&state)?;
    insert(&state, &tenant, &path, &fields, body.secret.as_deref(), key.as_deref()).await
}

async fn insert(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    fields: &EndpointFields,
    secret: Option<&str>,
    key: Option<&RequestKey>,
) -> Result<HttpResponse, ApiError> {
    let secret = match secret {
        Some(s) => signing::normalise_secret(s).map_err(|e| ApiError::Validation(e.to_string()))?,
        None => signing::generate_secret(),
    };
    let app = applications::find(state, tenant, app).await?;
    let id = EndpointId::generate();
    let sealed = secrets::seal(state, &tenant.0, &app.id, &id, &secret);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let cap = state.config.max_endpoints_per_app;
    let n = endpoints::lock_and_count(&*tx, &tenant.0, &app.id).await?;
    if n >= cap {
        return Err(ApiError::Validation(format!(
            "the application has {n} endpoints, the most allowed (HOOKGATE_MAX_ENDPOINTS_PER_APP is {cap})"
        )));
    }
    let ep = endpoints::insert(&*tx, &tenant.0, &app.id, &id, fields, &sealed)
        .await
        .map_err(|e| validate::conflict("an endpoint with this uid")(e.into()))?;
    let res = answer(&*tx, state, key, StatusCode::CREATED, &EndpointOut::from(ep)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

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
#[put("/app/{app_id}/endpoint/{endpoint_id}")]
async fn update(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = body.fields(&state)?;
    match find(&state, &tenant, &path.0, &path.1).await {
        Ok((app, ep)) => save(&state, &tenant, &app, &ep.id, &fields).await,
        Err(ApiError::NotFound("endpoint")) if path.1.creatable_uid().is_some() => {
            fields.uid = Some(fields.uid.unwrap_or_else(|| path.1.to_string()));
            insert(&state, &tenant, &path.0, &fields, body.secret.as_deref(), None).await
        }
        Err(e) => Err(e),
    }
}

#[patch("/app/{app_id}/endpoint/{endpoint_id}")]
async fn patch_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<EndpointPatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
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
        version: None,
    };
    save(&state, &tenant, &app, &ep.id, &merged.fields(&state)?).await
}

async fn save(
    state: &AppState,
    tenant: &TenantAuth,
    app: &AppId,
    id: &EndpointId,
    fields: &EndpointFields,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let saved = endpoints::replace(&**conn, &tenant.0, app, id, fields)
        .await
        .map_err(|e| validate::conflict("an endpoint with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("endpoint"))?;
    Ok(HttpResponse::Ok().json(EndpointOut::from(saved)))
}

#[delete("/app/{app_id}/endpoint/{endpoint_id}")]
async fn delete_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    if !endpoints::delete(&**conn, &tenant.0, &app, &ep.id).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    Ok(HttpResponse::NoContent().finish())
}
