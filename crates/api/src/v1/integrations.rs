//! `v1.integration`: an application's integrations, named keys its customer
//! gives third-party tools (Zapier and the like). A key reaches that
//! application's routes as an app-portal token does, with the integration's
//! feature flags, until it is rotated or the integration deleted. Kept sealed
//! with the tenant's key, so it can be shown again; only the tenant's API keys
//! manage them.

use actix_web::{delete, get, http::StatusCode, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::page::Page;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, IntegrationId, Ref, TenantId},
    store::{
        applications,
        integrations::{self, Fields, Integration},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{applications::find as find_app, validate};
use crate::idempotency::{answer, RequestKey};
use crate::{KeyAuth, KeyHolder, PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(delete_one);
    cfg.service(get_key).service(rotate_key);
}

/// Integrations an application may have.
const MOST_PER_APP: i64 = 100;
/// Feature flags an integration may carry (Svix's limit).
const MOST_FLAGS: usize = 25;

type IntegPath = web::Path<(Ref<AppId>, String)>;

/// An integration to create, or its new name and flags (PUT).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IntegrationIn {
    name: String,
    feature_flags: Option<Vec<String>>,
}

impl IntegrationIn {
    fn checked(&self) -> Result<Vec<String>, ApiError> {
        validate::name("name", &self.name)?;
        let flags = self.feature_flags.clone().unwrap_or_default();
        if flags.len() > MOST_FLAGS {
            return Err(ApiError::Validation(format!("`featureFlags`: at most {MOST_FLAGS}")));
        }
        flags.iter().try_for_each(|f| validate::uid("featureFlags", f))?;
        let mut unique = flags.clone();
        unique.sort();
        unique.dedup();
        if unique.len() != flags.len() {
            return Err(ApiError::Validation("`featureFlags`: each flag once".into()));
        }
        Ok(flags)
    }
}

/// An integration (Svix's `IntegrationOut`); its key is read apart.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct IntegrationOut {
    created_at: DateTime<Utc>,
    feature_flags: Vec<String>,
    id: IntegrationId,
    name: String,
    updated_at: DateTime<Utc>,
}

/// An integration's key, in clear (Svix's `IntegrationKeyOut`).
#[derive(Serialize, ToSchema)]
struct IntegrationKeyOut {
    key: String,
}

fn out(i: &Integration) -> IntegrationOut {
    IntegrationOut {
        created_at: i.created_at,
        feature_flags: i.feature_flags.clone(),
        id: i.id.clone(),
        name: i.name.clone(),
        updated_at: i.updated_at,
    }
}

/// What binds a sealed key to its integration.
fn purpose(app: &AppId, id: &IntegrationId) -> String {
    format!("integration-key:{app}:{id}")
}

/// A new key, sealed and hashed for storage, and in clear for the answer.
fn new_key(state: &AppState, tenant: &TenantId, app: &AppId, id: &IntegrationId) -> (String, Vec<u8>, Vec<u8>) {
    let key = integrations::new_key(tenant);
    let sealed = state.config.master_key.tenant_key(tenant).seal(&purpose(app, id), key.as_bytes());
    let hash = state.api_keys.hash(&key);
    (key, sealed, hash)
}

async fn find(state: &AppState, tenant: &TenantAuth, path: &IntegPath) -> Result<(AppId, Integration), ApiError> {
    let app = find_app(state, tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let found = integrations::get(&**conn, &tenant.0, &app.id, &path.1).await?;
    Ok((app.id, found.ok_or(ApiError::NotFound("integration"))?))
}

/// The integration's id from the path, for writes (a malformed one names none).
fn integ_id(s: &str) -> Result<IntegrationId, ApiError> {
    IntegrationId::parse(s).map_err(|_| ApiError::NotFound("integration"))
}

/// The application's integrations.
#[utoipa::path(params(PageQuery), tag = "Integration", operation_id = "hookgate.integration.list", responses((status = 200, body = Page<IntegrationOut>)))]
#[get("/app/{app_id}/integration")]
async fn list(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    page: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &TenantAuth(key.0.clone()), &path).await?;
    let conn = db::conn(&state.db).await?;
    let found = integrations::list(&**conn, &key.0, &app.id, &page.page::<IntegrationId>()?).await?;
    Ok(HttpResponse::Ok().json(found.map(|i| out(&i))))
}

/// 201 with the integration; its key is read with `…/key`. The key lives while
/// the API key that made it does.
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.create", responses((status = 201, body = IntegrationOut)))]
#[post("/app/{app_id}/integration")]
async fn create(
    key: KeyHolder,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<IntegrationIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let flags = body.checked()?;
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    // The application's row held: two creates cannot both take the last place.
    applications::get_for_update(&*tx, &tenant.0, &app.id).await?.ok_or(ApiError::NotFound("application"))?;
    if integrations::count(&*tx, &tenant.0, &app.id).await? >= MOST_PER_APP {
        return Err(ApiError::Conflict(format!("an application has at most {MOST_PER_APP} integrations")));
    }
    let id = IntegrationId::generate();
    let (_, sealed, hash) = new_key(&state, &tenant.0, &app.id, &id);
    let fields = Fields { name: &body.name, feature_flags: &flags };
    let made = integrations::create(&*tx, &tenant.0, &app.id, &id, &fields, &sealed, &hash, &key.1).await?;
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::CREATED, &out(&made)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// The integration.
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.get", responses((status = 200, body = IntegrationOut)))]
#[get("/app/{app_id}/integration/{integ_id}")]
async fn get_one(key: KeyAuth, state: web::Data<AppState>, path: IntegPath) -> Result<HttpResponse, ApiError> {
    let (_, found) = find(&state, &TenantAuth(key.0), &path).await?;
    Ok(HttpResponse::Ok().json(out(&found)))
}

/// Replaces the integration's name and feature flags; its key is kept.
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.update", responses((status = 200, body = IntegrationOut)))]
#[put("/app/{app_id}/integration/{integ_id}")]
async fn update(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: IntegPath,
    body: web::Json<IntegrationIn>,
) -> Result<HttpResponse, ApiError> {
    let flags = body.checked()?;
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path.0).await?;
    let id = integ_id(&path.1)?;
    let conn = db::conn(&state.db).await?;
    let fields = Fields { name: &body.name, feature_flags: &flags };
    let saved = integrations::update(&**conn, &tenant.0, &app.id, &id, &fields, &state.caches).await?;
    Ok(HttpResponse::Ok().json(out(&saved.ok_or(ApiError::NotFound("integration"))?)))
}

/// 204; its key stops opening anything at once.
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.delete", responses((status = 204, description = "deleted")))]
#[delete("/app/{app_id}/integration/{integ_id}")]
async fn delete_one(key: KeyAuth, state: web::Data<AppState>, path: IntegPath) -> Result<HttpResponse, ApiError> {
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path.0).await?;
    let id = integ_id(&path.1)?;
    let conn = db::conn(&state.db).await?;
    if !integrations::delete(&**conn, &tenant.0, &app.id, &id, &state.caches).await? {
        return Err(ApiError::NotFound("integration"));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// The key in clear (`IntegrationKeyOut`).
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.get-key", responses((status = 200, body = IntegrationKeyOut)))]
#[get("/app/{app_id}/integration/{integ_id}/key")]
async fn get_key(key: KeyAuth, state: web::Data<AppState>, path: IntegPath) -> Result<HttpResponse, ApiError> {
    let (app, found) = find(&state, &TenantAuth(key.0.clone()), &path).await?;
    let clear = state
        .config
        .master_key
        .tenant_key(&key.0)
        .open(&purpose(&app, &found.id), &found.key_sealed)
        .map_err(|e| ApiError::Internal(format!("integration {}: {e}", found.id)))?;
    let clear = String::from_utf8(clear).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok().json(IntegrationKeyOut { key: clear }))
}

/// A new key, answered; the former one is refused at once (in this process;
/// others within a second, as their caches expire).
#[utoipa::path(tag = "Integration", operation_id = "hookgate.integration.rotate-key", responses((status = 200, body = IntegrationKeyOut)))]
#[post("/app/{app_id}/integration/{integ_id}/key/rotate")]
async fn rotate_key(
    key: KeyHolder,
    state: web::Data<AppState>,
    path: IntegPath,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = TenantAuth(key.0);
    let (app, found) = find(&state, &tenant, &path).await?;
    let (clear, sealed, hash) = new_key(&state, &tenant.0, &app, &found.id);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !integrations::set_key(&*tx, &tenant.0, &app, &found.id, &sealed, &hash, &key.1, &state.caches).await? {
        return Err(ApiError::NotFound("integration"));
    }
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::OK, &IntegrationKeyOut { key: clear }).await?;
    tx.commit().await.map_err(StoreError::from)?;
    // Forgotten again once committed: a lookup between the two would have cached the old key.
    state.caches.integration_keys.clear();
    Ok(res)
}
