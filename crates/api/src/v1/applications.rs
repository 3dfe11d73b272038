//! `v1.application.*`: list, create (with `get_if_exists`), get, update, patch, delete.

use std::{collections::HashMap, time::Instant};

use crate::idempotency::{answer, RequestKey};
use crate::{Maybe, PageQuery, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::StoreError;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref, TenantId},
    prune::BATCH,
    store::{
        applications::{self, Application, ApplicationFields},
        erasure::{self, Erasure},
    },
    AppState,
};
use serde::{Deserialize, Serialize};

use super::validate;
use hookgate_shared::store::page::Page;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_app).service(update).service(patch_app).service(delete_app);
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApplicationIn)]
pub(crate) struct AppIn {
    name: String,
    uid: Option<String>,
    #[serde(alias = "rateLimit")]
    throttle_rate: Option<i64>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    metadata: HashMap<String, String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApplicationPatch)]
struct AppPatch {
    name: Option<String>,
    #[serde(default)]
    uid: Maybe<String>,
    #[serde(default, alias = "rateLimit")]
    throttle_rate: Maybe<i64>,
    metadata: Option<HashMap<String, String>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApplicationOut)]
pub(crate) struct AppOut {
    id: String,
    uid: Option<String>,
    name: String,
    throttle_rate: Option<i32>,
    /// `throttleRate` under its deprecated name, which Svix still answers.
    #[schema(deprecated)]
    rate_limit: Option<i32>,
    metadata: serde_json::Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<Application> for AppOut {
    fn from(a: Application) -> Self {
        AppOut {
            id: a.id.to_string(),
            uid: a.uid,
            name: a.name,
            throttle_rate: a.throttle_rate,
            rate_limit: a.throttle_rate,
            metadata: a.metadata,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// A large erasure the request's time did not cover: the pruners finish it.
#[derive(Serialize, ToSchema)]
pub(crate) struct Erasing {
    /// Always `erasing`.
    status: &'static str,
}

#[derive(Deserialize, utoipa::IntoParams)]
struct CreateQuery {
    #[serde(default)]
    get_if_exists: bool,
}

impl AppIn {
    pub(crate) fn new(
        name: String,
        uid: Option<String>,
        throttle_rate: Option<i64>,
        metadata: HashMap<String, String>,
    ) -> Self {
        AppIn { name, uid, throttle_rate, metadata }
    }

    pub(crate) fn into_fields(self) -> Result<ApplicationFields, ApiError> {
        validate::name("name", &self.name)?;
        if let Some(uid) = &self.uid {
            validate::uid("uid", uid)?;
        }
        Ok(ApplicationFields {
            uid: self.uid,
            name: self.name,
            throttle_rate: validate::throttle_rate(self.throttle_rate)?,
            metadata: serde_json::to_value(self.metadata).expect("a string map serialises"),
        })
    }
}

/// Looks up an application of this tenant by id or uid; 404 if it is not theirs.
pub(crate) async fn find(state: &AppState, tenant: &TenantAuth, app: &Ref<AppId>) -> Result<Application, ApiError> {
    let conn = db::conn(&state.db).await?;
    applications::get(&**conn, &tenant.0, app).await?.ok_or(ApiError::NotFound("application"))
}

#[utoipa::path(params(PageQuery), tag = "Application", operation_id = "v1.application.list", responses((status = 200, body = Page<AppOut>)))]
#[get("/app")]
async fn list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page = applications::list(&**conn, &tenant.0, &q.page::<AppId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(AppOut::from)))
}

#[utoipa::path(params(CreateQuery), tag = "Application", operation_id = "v1.application.create", responses((status = 201, body = AppOut), (status = 200, description = "`get_if_exists` found it", body = AppOut)))]
#[post("/app")]
async fn create(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    q: web::Query<CreateQuery>,
    body: web::Json<AppIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let fields = body.into_inner().into_fields()?;
    let cap = crate::quota::app_cap(&state, &tenant.0).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if q.get_if_exists {
        if let Some(uid) = &fields.uid {
            if let Some(existing) = applications::get(&*tx, &tenant.0, &Ref::Uid(uid.clone())).await? {
                return Ok(HttpResponse::Ok().json(AppOut::from(existing)));
            }
        }
    }
    let app = crate::quota::insert_app(&state, &*tx, &tenant.0, &fields, cap)
        .await
        .map_err(validate::conflict("an application with this uid"))?;
    let res = answer(&*tx, &state, key.as_deref(), StatusCode::CREATED, &AppOut::from(app)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

#[utoipa::path(tag = "Application", operation_id = "v1.application.get", responses((status = 200, body = AppOut)))]
#[get("/app/{app_id}")]
async fn get_app(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(AppOut::from(find(&state, &tenant, &path).await?)))
}

/// PUT: replaces every writable field; an application that does not exist is
/// created with the path as its `uid` (201), as Svix does.
#[utoipa::path(tag = "Application", operation_id = "v1.application.update", responses((status = 200, body = AppOut), (status = 201, description = "created under the path as its uid", body = AppOut)))]
#[put("/app/{app_id}")]
async fn update(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<AppIn>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = body.into_inner().into_fields()?;
    match find(&state, &tenant, &path).await {
        Ok(app) => save(&state, &tenant, &app.id, &fields).await,
        // PUT to a uid that names no application creates it (`app_…` ids are never made up).
        Err(ApiError::NotFound(_)) if path.creatable_uid().is_some() => {
            fields.uid = Some(fields.uid.unwrap_or_else(|| path.to_string()));
            let cap = crate::quota::app_cap(&state, &tenant.0).await?;
            let mut conn = db::conn(&state.db).await?;
            let tx = conn.transaction().await.map_err(StoreError::from)?;
            let app = crate::quota::insert_app(&state, &*tx, &tenant.0, &fields, cap)
                .await
                .map_err(validate::conflict("an application with this uid"))?;
            tx.commit().await.map_err(StoreError::from)?;
            Ok(HttpResponse::Created().json(AppOut::from(app)))
        }
        Err(e) => Err(e),
    }
}

#[utoipa::path(tag = "Application", operation_id = "v1.application.patch", responses((status = 200, body = AppOut)))]
#[patch("/app/{app_id}")]
async fn patch_app(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<AppPatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    let found = find(&state, &tenant, &path).await?;
    // Read, merged and written under the row's lock: a concurrent PATCH of
    // another field is kept.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let app =
        applications::get_for_update(&*tx, &tenant.0, &found.id).await?.ok_or(ApiError::NotFound("application"))?;
    let merged = AppIn {
        name: p.name.unwrap_or(app.name),
        uid: p.uid.into_update().unwrap_or(app.uid),
        throttle_rate: p.throttle_rate.into_update().unwrap_or(app.throttle_rate.map(i64::from)),
        metadata: match p.metadata {
            Some(m) => m,
            None => serde_json::from_value(app.metadata).unwrap_or_default(),
        },
    };
    let saved = replace(&*tx, &tenant, &app.id, &merged.into_fields()?).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(saved)
}

async fn save(
    state: &AppState,
    tenant: &TenantAuth,
    id: &AppId,
    fields: &ApplicationFields,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    replace(&**conn, tenant, id, fields).await
}

async fn replace(
    db: &impl tokio_postgres::GenericClient,
    tenant: &TenantAuth,
    id: &AppId,
    fields: &ApplicationFields,
) -> Result<HttpResponse, ApiError> {
    let saved = applications::replace(db, &tenant.0, id, fields)
        .await
        .map_err(|e| validate::conflict("an application with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("application"))?;
    Ok(HttpResponse::Ok().json(AppOut::from(saved)))
}

#[utoipa::path(tag = "Application", operation_id = "v1.application.delete", responses((status = 204, description = "erased"), (status = 202, body = Erasing)))]
#[delete("/app/{app_id}")]
async fn delete_app(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
) -> Result<HttpResponse, ApiError> {
    let app = find(&state, &tenant, &path).await?;
    erase(&state, &tenant.0, &app.id).await
}

/// Erases an application and everything under it (messages, deliveries, attempts,
/// endpoints, sources, inbound events), as a GDPR request for one customer needs:
/// removed from the database, not hidden. A large one is erased in bounded
/// batches: what does not fit in this request's time the pruners finish, and the
/// answer is then 202 `{"status": "erasing"}` (the application stays visible,
/// shrinking, until its last row is gone); otherwise 204.
pub(crate) async fn erase(state: &AppState, tenant: &TenantId, app: &AppId) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let mut conn = db::conn(&state.db).await?;
    erasure::request_erasure(&**conn, tenant, app, &state.caches).await?;
    loop {
        match erasure::erase_step(&mut **conn, tenant, app, BATCH, &state.caches).await? {
            Erasure::Done => return Ok(HttpResponse::NoContent().finish()),
            Erasure::Progress(_) if started.elapsed() > state.db_budget() / 2 => {
                return Ok(HttpResponse::Accepted().json(Erasing { status: "erasing" }));
            }
            Erasure::Progress(_) => {}
        }
    }
}
