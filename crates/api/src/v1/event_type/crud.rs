//! `v1.event-type.*`: list, create, get, update (PUT, upserting), patch, delete (archive).

use crate::idempotency::{answer, RequestKey};
use crate::path::EventTypeName;
use crate::{FeatureFlags, Maybe, PageQuery, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::StoreError;
use hookgate_shared::{
    db,
    http::ApiError,
    store::event_types::{self, EventType},
    AppState,
};
use serde::{Deserialize, Serialize};

use crate::v1::validate;
use hookgate_shared::store::page::Page;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(patch_one).service(delete_one);
}

/// An event type as created (`name` required) or replaced by PUT (`name` from the path).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventTypeIn {
    name: Option<String>,
    description: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    archived: bool,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    deprecated: bool,
    /// The payload's JSON schema per version, e.g. `{"1": {…}}`.
    schemas: Option<serde_json::Value>,
    feature_flag: Option<String>,
    /// Svix's newer form of `featureFlag` (what the SDKs send): at most one here.
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    feature_flags: Vec<String>,
}

/// The one flag of `featureFlag` or `featureFlags` (Hookgate's event types carry one).
fn one_flag(flag: Option<String>, flags: Vec<String>) -> Result<Option<String>, ApiError> {
    if flag.is_some() {
        return Ok(flag);
    }
    match <[String; 1]>::try_from(flags) {
        Ok([one]) => Ok(Some(one)),
        Err(none) if none.is_empty() => Ok(None),
        Err(_) => {
            Err(ApiError::Validation("`featureFlags`: Hookgate's event types carry at most one feature flag".into()))
        }
    }
}

/// The fields a PATCH changes; absent ones are kept, `null` clears.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventTypePatch {
    description: Option<String>,
    archived: Option<bool>,
    deprecated: Option<bool>,
    #[serde(default)]
    schemas: Maybe<serde_json::Value>,
    #[serde(default)]
    feature_flag: Maybe<String>,
    #[serde(default)]
    feature_flags: Maybe<Vec<String>>,
}

/// An event type as every route answers it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventTypeOut {
    name: String,
    description: String,
    archived: bool,
    deprecated: bool,
    schemas: Option<serde_json::Value>,
    feature_flag: Option<String>,
    /// The same flag as Svix's newer list (empty: none).
    feature_flags: Vec<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<EventType> for EventTypeOut {
    fn from(e: EventType) -> Self {
        EventTypeOut {
            name: e.name,
            description: e.description,
            archived: e.archived,
            deprecated: e.deprecated,
            schemas: e.schemas,
            feature_flags: e.feature_flag.iter().cloned().collect(),
            feature_flag: e.feature_flag,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

fn to_row(name: String, b: EventTypeIn) -> Result<EventType, ApiError> {
    validate::uid("name", &name)?;
    // A list's `-name` iterator pages back: a name that starts so could not be paged past.
    if name.starts_with('-') {
        return Err(ApiError::Validation("`name` must not start with `-`".into()));
    }
    let feature_flag = one_flag(b.feature_flag, b.feature_flags)?;
    if let Some(f) = &feature_flag {
        validate::uid("featureFlag", f)?;
    }
    let now = Utc::now();
    Ok(EventType {
        name,
        description: b.description,
        archived: b.archived,
        deprecated: b.deprecated,
        schemas: b.schemas,
        feature_flag,
        created_at: now,
        updated_at: now,
    })
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Archived event types are listed too.
    #[serde(default)]
    include_archived: bool,
}

/// The tenant's event types (those behind a feature flag only for a token that has it).
#[utoipa::path(params(PageQuery, ListQuery), tag = "Event Type", operation_id = "v1.event-type.list", responses((status = 200, body = Page<EventTypeOut>)))]
#[get("/event-type")]
async fn list(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
    f: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page =
        event_types::list(&**conn, &tenant.0, &q.page_by_name()?, f.include_archived, flags.0.as_deref()).await?;
    Ok(HttpResponse::Ok().json(page.map(EventTypeOut::from)))
}

/// Creates an event type; 409 if the name is taken.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.create", responses((status = 201, body = EventTypeOut)))]
#[post("/event-type")]
async fn create(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    body: web::Json<EventTypeIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let mut body = body.into_inner();
    let name = body.name.take().ok_or_else(|| ApiError::Validation("`name` is required".into()))?;
    let row = to_row(name, body)?;
    if let Some(s) = &row.schemas {
        crate::v1::json_schema::check(s)?;
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let e = event_types::insert(&*tx, &tenant.0, &row)
        .await
        .map_err(|e| validate::conflict("an event type with this name")(e.into()))?;
    let res = answer(&*tx, &state, key.as_deref(), StatusCode::CREATED, &EventTypeOut::from(e)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// One event type, by name.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.get", responses((status = 200, body = EventTypeOut)))]
#[get("/event-type/{event_type_name}")]
async fn get_one(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let e = event_types::get_visible(&**conn, &tenant.0, &name, flags.0.as_deref())
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    Ok(HttpResponse::Ok().json(EventTypeOut::from(e)))
}

/// PUT creates the event type if it does not exist (201), as Svix does.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.update", responses((status = 200, body = EventTypeOut), (status = 201, description = "created", body = EventTypeOut)))]
#[put("/event-type/{event_type_name}")]
async fn update(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
    body: web::Json<EventTypeIn>,
) -> Result<HttpResponse, ApiError> {
    let row = to_row(name.to_string(), body.into_inner())?;
    if let Some(s) = &row.schemas {
        crate::v1::json_schema::check(s)?;
    }
    let conn = db::conn(&state.db).await?;
    let (e, created) = event_types::upsert(&**conn, &tenant.0, &row).await?;
    let mut res = if created { HttpResponse::Created() } else { HttpResponse::Ok() };
    Ok(res.json(EventTypeOut::from(e)))
}

/// Changes the fields given, keeps the others.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.patch", responses((status = 200, body = EventTypeOut)))]
#[patch("/event-type/{event_type_name}")]
async fn patch_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
    body: web::Json<EventTypePatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    // Only schemas the PATCH sets are checked: one stored before the check
    // existed does not block a change of the description.
    if let Maybe::Value(s) = &p.schemas {
        crate::v1::json_schema::check(s)?;
    }
    // Read, merged and written under the row's lock: a concurrent PATCH of
    // another field is kept.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let e = event_types::get_for_update(&*tx, &tenant.0, &name).await?.ok_or(ApiError::NotFound("event type"))?;
    let merged = EventTypeIn {
        name: None,
        description: p.description.unwrap_or(e.description),
        archived: p.archived.unwrap_or(e.archived),
        deprecated: p.deprecated.unwrap_or(e.deprecated),
        schemas: p.schemas.into_update().unwrap_or(e.schemas),
        feature_flag: match p.feature_flags {
            Maybe::Value(flags) => one_flag(None, flags)?,
            Maybe::Null => None,
            Maybe::Absent => p.feature_flag.into_update().unwrap_or(e.feature_flag),
        },
        feature_flags: Vec::new(),
    };
    let (saved, _) = event_types::upsert(&*tx, &tenant.0, &to_row(e.name, merged)?).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(EventTypeOut::from(saved)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DeleteQuery {
    /// Deleted for good instead of archived.
    #[serde(default)]
    expunge: bool,
}

/// Archives the event type, or with `expunge` deletes it.
#[utoipa::path(params(DeleteQuery), tag = "Event Type", operation_id = "v1.event-type.delete", responses((status = 204, description = "archived or deleted")))]
#[delete("/event-type/{event_type_name}")]
async fn delete_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
    q: web::Query<DeleteQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    if !event_types::delete(&**conn, &tenant.0, &name, q.expunge).await? {
        return Err(ApiError::NotFound("event type"));
    }
    Ok(HttpResponse::NoContent().finish())
}
