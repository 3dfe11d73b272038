//! `/api/v1/broker-source`: queues and streams the workers consume into messages
//! of the send API (RabbitMQ, SQS, Redis streams), with their configurations
//! sealed and shown without credentials, and the broker messages set aside as
//! dead letters. Only a tenant's API keys manage them (not portal links).

use actix_web::{delete, get, patch, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::destinations::brokers::BrokerConfig;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, BrokerSourceId, Ref, TenantId},
    store::{
        broker_sources::{self, BrokerSource, Fields},
        page::{Page, MAX_LIMIT},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{applications::find as find_app, endpoint::crud::allowed, validate};
use crate::{KeyAuth, Maybe, PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(delete_one).service(dead_letters);
}

/// Broker sources a tenant may have: each holds a connection in a worker.
const MOST_PER_TENANT: i64 = 20;

/// A broker source to create.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = BrokerSourceIn)]
pub(crate) struct SourceIn {
    name: String,
    /// `rabbitMq`, `sqs` or `redis`.
    #[serde(rename = "type")]
    kind: String,
    /// The application a broker message goes to when it names none (id or uid).
    app_id: Option<String>,
    #[schema(value_type = Object)]
    config: Value,
    #[serde(default)]
    disabled: bool,
}

/// A change: absent fields stay; `appId: null` removes the default application.
/// A `config` replaces the stored one, its password or secret key kept if left
/// out or given as shown.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = BrokerSourcePatch)]
pub(crate) struct SourcePatch {
    name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    app_id: Maybe<String>,
    #[schema(value_type = Option<Object>)]
    config: Option<Value>,
    disabled: Option<bool>,
}

/// A broker source as shown: its configuration without credentials, and how
/// its consumer is doing.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = BrokerSourceOut)]
pub(crate) struct SourceOut {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    app_id: Option<String>,
    #[schema(value_type = Object)]
    config: Value,
    disabled: bool,
    /// When its consumer last read from the broker without an error.
    last_read_at: Option<DateTime<Utc>>,
    /// The last error it met, until a read succeeds.
    last_error: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn out(state: &AppState, s: BrokerSource) -> SourceOut {
    let config = BrokerConfig::open(state, &s.tenant_id, &s.id, &s.kind, &s.config_sealed)
        .map(|c| c.shown())
        .unwrap_or(Value::Null);
    SourceOut {
        id: s.id.to_string(),
        name: s.name,
        kind: s.kind,
        app_id: s.app_id.map(|a| a.to_string()),
        config,
        disabled: s.disabled,
        last_read_at: s.last_read_at,
        last_error: s.last_error,
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

/// The application named (id or uid) as an id, checked to be the tenant's.
async fn app_of(state: &AppState, tenant: &TenantId, given: &str) -> Result<AppId, ApiError> {
    let r = Ref::<AppId>::parse(given).map_err(|e| ApiError::Validation(format!("`appId`: {e}")))?;
    let app = find_app(state, &TenantAuth(tenant.clone()), &r).await.map_err(|_| {
        ApiError::Validation(format!("`appId`: no application `{}`", given.chars().take(64).collect::<String>()))
    })?;
    Ok(app.id)
}

async fn parse_config(
    state: &AppState,
    tenant: &TenantId,
    kind: &str,
    config: Value,
) -> Result<BrokerConfig, ApiError> {
    let guard = allowed(state, tenant).await?;
    BrokerConfig::parse(kind, config, &guard).map_err(|e| ApiError::Validation(e.0))
}

async fn find(state: &AppState, tenant: &TenantId, id: &str) -> Result<BrokerSource, ApiError> {
    let id = BrokerSourceId::parse(id).map_err(|_| ApiError::NotFound("broker source"))?;
    let conn = db::conn(&state.db).await?;
    broker_sources::get(&**conn, tenant, &id).await?.ok_or(ApiError::NotFound("broker source"))
}

/// The tenant's broker sources (at most 20 in all), in id order.
#[utoipa::path(params(PageQuery), tag = "Broker source", operation_id = "hookgate.broker-source.list", responses((status = 200, body = Page<SourceOut>)))]
#[get("/broker-source")]
async fn list(key: KeyAuth, state: web::Data<AppState>, q: web::Query<PageQuery>) -> Result<HttpResponse, ApiError> {
    list_for(&state, &key.0, &q).await
}

pub(crate) async fn list_for(state: &AppState, tenant: &TenantId, q: &PageQuery) -> Result<HttpResponse, ApiError> {
    // Refused rather than clamped, as this list always has.
    if q.limit.is_some_and(|l| !(1..=MAX_LIMIT).contains(&l)) {
        return Err(ApiError::Validation(format!("`limit` must be 1 to {MAX_LIMIT}")));
    }
    let page = q.page::<BrokerSourceId>()?;
    let conn = db::conn(&state.db).await?;
    let found = broker_sources::list(&**conn, tenant, &page).await?;
    Ok(HttpResponse::Ok().json(found.map(|s| out(state, s))))
}

/// Creates a broker source; a worker starts consuming it within seconds.
#[utoipa::path(tag = "Broker source", operation_id = "hookgate.broker-source.create", request_body = SourceIn, responses((status = 201, body = SourceOut)))]
#[post("/broker-source")]
async fn create(key: KeyAuth, state: web::Data<AppState>, body: web::Json<SourceIn>) -> Result<HttpResponse, ApiError> {
    create_for(&state, &key.0, body.into_inner()).await
}

pub(crate) async fn create_for(state: &AppState, tenant: &TenantId, body: SourceIn) -> Result<HttpResponse, ApiError> {
    validate::name("name", &body.name)?;
    let app_id = match &body.app_id {
        Some(a) => Some(app_of(state, tenant, a).await?),
        None => None,
    };
    let cfg = parse_config(state, tenant, &body.kind, body.config).await?;
    let id = BrokerSourceId::generate();
    let fields = Fields {
        name: body.name,
        kind: cfg.kind().to_owned(),
        app_id,
        config_sealed: cfg.seal(state, tenant, &id),
        disabled: body.disabled,
    };
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let Some(made) = broker_sources::insert_capped(&*tx, tenant, &id, &fields, MOST_PER_TENANT).await? else {
        return Err(ApiError::Validation(format!("a tenant has at most {MOST_PER_TENANT} broker sources")));
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Created().json(out(state, made)))
}

#[utoipa::path(tag = "Broker source", operation_id = "hookgate.broker-source.get", responses((status = 200, body = SourceOut)))]
#[get("/broker-source/{source_id}")]
async fn get_one(key: KeyAuth, state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    get_for(&state, &key.0, &path).await
}

pub(crate) async fn get_for(state: &AppState, tenant: &TenantId, id: &str) -> Result<HttpResponse, ApiError> {
    let s = find(state, tenant, id).await?;
    Ok(HttpResponse::Ok().json(out(state, s)))
}

/// Changes a broker source; its consumer starts again with the new settings.
#[utoipa::path(tag = "Broker source", operation_id = "hookgate.broker-source.patch", request_body = SourcePatch, responses((status = 200, body = SourceOut)))]
#[patch("/broker-source/{source_id}")]
async fn update(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    patch_for(&state, &key.0, &path, body.into_inner()).await
}

pub(crate) async fn patch_for(
    state: &AppState,
    tenant: &TenantId,
    id: &str,
    body: SourcePatch,
) -> Result<HttpResponse, ApiError> {
    let stored = find(state, tenant, id).await?;
    if let Some(n) = &body.name {
        validate::name("name", n)?;
    }
    let app_id = match body.app_id.into_update() {
        None => stored.app_id.clone(),
        Some(None) => None,
        Some(Some(a)) => Some(app_of(state, tenant, &a).await?),
    };
    let config_sealed = match body.config {
        None => stored.config_sealed.clone(),
        Some(given) => {
            let mut cfg = parse_config(state, tenant, &stored.kind, given).await?;
            if let Ok(old) = BrokerConfig::open(state, tenant, &stored.id, &stored.kind, &stored.config_sealed) {
                cfg.keep_redacted(&old).map_err(|e| ApiError::Validation(e.0))?;
            }
            cfg.seal(state, tenant, &stored.id)
        }
    };
    let fields = Fields {
        name: body.name.unwrap_or(stored.name),
        kind: stored.kind,
        app_id,
        config_sealed,
        disabled: body.disabled.unwrap_or(stored.disabled),
    };
    let conn = db::conn(&state.db).await?;
    let s = broker_sources::update(&**conn, tenant, &stored.id, &fields)
        .await?
        .ok_or(ApiError::NotFound("broker source"))?;
    Ok(HttpResponse::Ok().json(out(state, s)))
}

/// Deletes a broker source and its dead letters; its consumer stops within seconds.
#[utoipa::path(tag = "Broker source", operation_id = "hookgate.broker-source.delete", responses((status = 204, description = "deleted")))]
#[delete("/broker-source/{source_id}")]
async fn delete_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    delete_for(&state, &key.0, &path).await
}

pub(crate) async fn delete_for(state: &AppState, tenant: &TenantId, id: &str) -> Result<HttpResponse, ApiError> {
    let s = find(state, tenant, id).await?;
    let conn = db::conn(&state.db).await?;
    broker_sources::delete(&**conn, tenant, &s.id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize, IntoParams)]
pub(crate) struct DeadLetterQuery {
    /// At most this many (1 to 100, 50).
    limit: Option<i64>,
    /// The `iterator` of an earlier page: older ones.
    iterator: Option<String>,
}

/// A broker message set aside.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = BrokerDeadLetterOut)]
pub(crate) struct DeadLetterOut {
    id: String,
    broker_id: Option<String>,
    reason: String,
    /// The body as text (its first 64 KiB), or base64 when not UTF-8 (`bodyBase64`).
    body: Option<String>,
    body_base64: bool,
    #[schema(value_type = Object)]
    headers: Option<Value>,
    created_at: DateTime<Utc>,
}

/// The source's dead letters, newest first (kept 30 days).
#[utoipa::path(params(DeadLetterQuery), tag = "Broker source", operation_id = "hookgate.broker-source.dead-letters", responses((status = 200, body = Page<DeadLetterOut>)))]
#[get("/broker-source/{source_id}/dead-letter")]
async fn dead_letters(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    q: web::Query<DeadLetterQuery>,
) -> Result<HttpResponse, ApiError> {
    dead_letters_for(&state, &key.0, &path, &q).await
}

pub(crate) async fn dead_letters_for(
    state: &AppState,
    tenant: &TenantId,
    id: &str,
    q: &DeadLetterQuery,
) -> Result<HttpResponse, ApiError> {
    let s = find(state, tenant, id).await?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::Validation("`limit` must be 1 to 100".into()));
    }
    let before = match &q.iterator {
        None => None,
        Some(i) => Some(i.parse::<i64>().map_err(|_| ApiError::Validation("`iterator` is not one we gave".into()))?),
    };
    let conn = db::conn(&state.db).await?;
    let mut rows = broker_sources::dead_letters(&**conn, tenant, &s.id, before, limit + 1).await?;
    let done = rows.len() as i64 <= limit;
    rows.truncate(limit as usize);
    let iterator = (!done).then(|| rows.last().map(|r| r.id.to_string())).flatten();
    let data: Vec<DeadLetterOut> = rows
        .into_iter()
        .map(|r| {
            let (body, body_base64) = match r.body {
                None => (None, false),
                Some(b) => match String::from_utf8(b) {
                    Ok(t) => (Some(t), false),
                    Err(e) => {
                        use base64::Engine;
                        (Some(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())), true)
                    }
                },
            };
            DeadLetterOut {
                id: r.id.to_string(),
                broker_id: r.broker_id,
                reason: r.reason,
                body,
                body_base64,
                headers: r.headers,
                created_at: r.created_at,
            }
        })
        .collect();
    Ok(HttpResponse::Ok().json(Page { data, iterator, prev_iterator: None, done }))
}
