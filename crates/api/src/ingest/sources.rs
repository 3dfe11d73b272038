//! `/ingest/api/v1/source`: Svix Ingest's sources, as the official SDKs call them
//! (list, create, get by id or uid, upsert, delete, rotate the URL's token).

use actix_web::http::StatusCode;
use actix_web::{delete, get, post, put, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use hookgate_ingress::secrets;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref, SourceId, TenantId},
    ingest::IngestType,
    source::{KeySpec, Mode},
    store::{
        applications::ApplicationFields,
        ingest_sources::{self, IngestFields, NewToken},
        page::Page,
        sources::{Source, SourceFields},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::{answer, RequestKey};
use crate::v1::validate;
use crate::{KeyAuth, PageQuery};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(upsert).service(delete_one).service(rotate_token);
}

/// The most cron sources a tenant may have: each one's ticks are admitted by
/// every ingress process.
const MOST_CRON_SOURCES: i64 = 100;

/// 422 when the tenant already has as many cron sources as it may.
async fn cron_room(db: &impl tokio_postgres::GenericClient, tenant: &TenantId, c: &Checked) -> Result<(), ApiError> {
    if c.kind.name == "cron" && ingest_sources::count_cron(db, tenant).await? >= MOST_CRON_SOURCES {
        return Err(ApiError::Validation(format!("a tenant may have at most {MOST_CRON_SOURCES} cron sources")));
    }
    Ok(())
}

/// How long a token rotated out still opens the source, and how many may be
/// open at once besides the current one (as Svix: 48 hours, three rotations).
const TOKEN_GRACE_HOURS: i64 = 48;
const MOST_OLD_TOKENS: usize = 3;

/// An ingest source to create or replace: its type and the type's settings.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IngestSourceIn {
    name: String,
    uid: Option<String>,
    metadata: Option<HashMap<String, String>>,
    #[serde(rename = "type")]
    kind: String,
    /// The type's settings (its secret among them), as Svix names them.
    #[serde(default)]
    config: Option<Value>,
}

/// An ingest source: its `ingestUrl`, type and settings that are no secret.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct IngestSourceOut {
    id: String,
    uid: Option<String>,
    name: String,
    /// `None` for a cron source, which has no door.
    ingest_url: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    #[schema(value_type = HashMap<String, String>)]
    metadata: Value,
    #[serde(rename = "type")]
    kind: String,
    /// Secrets are never shown back: what is shown is the settings that are no
    /// secret (a cron source's), `{}` for the others.
    config: Value,
}

/// A rotated token's `ingestUrl`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct RotateTokenOut {
    ingest_url: String,
}

/// The `ingestUrl` of a source whose token is `token`.
fn ingest_url(req: &HttpRequest, state: &AppState, id: &SourceId, token: &str) -> String {
    format!("{}/{token}", hookgate_shared::http::source_url(req, &state.config, id))
}

pub(super) fn out(req: &HttpRequest, state: &AppState, s: Source) -> Result<IngestSourceOut, ApiError> {
    let token = secrets::open_token(state, &s).map_err(ApiError::Internal)?.unwrap_or_default();
    let ingest = s.ingest.ok_or(ApiError::NotFound("ingest source"))?;
    let door = ingest.type_name != "cron";
    Ok(IngestSourceOut {
        ingest_url: door.then(|| ingest_url(req, state, &s.id, &token)),
        id: s.id.to_string(),
        uid: ingest.uid,
        name: s.name,
        created_at: s.created_at,
        updated_at: s.updated_at,
        metadata: ingest.metadata,
        kind: ingest.type_name,
        config: shown_config(ingest.config),
    })
}

/// The settings as answers show them: never the verify token's hash.
fn shown_config(mut config: Value) -> Value {
    if let Some(map) = config.as_object_mut() {
        map.remove(secrets::VERIFY_TOKEN_HASH);
    }
    config
}

/// The settings as stored: shown ones, and the verify token's hash (the new
/// token's, else `kept`, the stored one); 422 for a Meta source without any.
fn stored_config(state: &AppState, c: &Checked, kept: Option<&Value>) -> Result<Value, ApiError> {
    let mut config = c.shown.clone();
    let hash = match (&c.verify_token, kept) {
        (Some(t), _) => Some(json!(secrets::verify_token_hash(state, t))),
        (None, Some(h)) => Some(h.clone()),
        (None, None) if c.kind.name == "meta" => {
            return Err(ApiError::Validation("`config.verifyToken` is required for a `meta` source".into()))
        }
        (None, None) => None,
    };
    if let (Some(h), Some(map)) = (hash, config.as_object_mut()) {
        map.insert(secrets::VERIFY_TOKEN_HASH.into(), h);
    }
    Ok(config)
}

/// A checked request: the source's fields, its ingest fields and its secret.
struct Checked {
    kind: IngestType,
    name: String,
    uid: Option<String>,
    metadata: Value,
    provider: hookgate_shared::source::Provider,
    secret: Option<String>,
    /// The settings that are no secret, stored and shown back.
    shown: Value,
    /// How a new source of the type keys its events, and where it reads their type.
    idempotency: KeySpec,
    event_type_path: Option<String>,
    /// The verify token of the sender's subscription check, if one was given.
    verify_token: Option<String>,
}

fn check(b: &IngestSourceIn) -> Result<Checked, ApiError> {
    validate::name("name", b.name.trim())?;
    if let Some(uid) = &b.uid {
        validate::uid("uid", uid)?;
        if SourceId::parse(uid).is_ok() || uid.starts_with("src_") {
            return Err(ApiError::Validation("`uid` must not look like a source id (`src_…`)".into()));
        }
    }
    let kind = IngestType::parse(&b.kind).map_err(ApiError::Validation)?;
    let resolved = kind.resolve(b.config.as_ref().unwrap_or(&json!({}))).map_err(ApiError::Validation)?;
    let secret = match &resolved.secret {
        Some(s) => Some(
            secrets::check(&resolved.provider, s)
                .map_err(|e| ApiError::Validation(format!("`config.{}`: {e}", kind.credential_field())))?,
        ),
        None => None,
    };
    Ok(Checked {
        kind,
        name: b.name.trim().to_owned(),
        uid: b.uid.clone(),
        metadata: serde_json::to_value(b.metadata.clone().unwrap_or_default()).expect("a map serialises"),
        provider: resolved.provider,
        secret,
        shown: resolved.shown,
        idempotency: resolved.idempotency,
        event_type_path: resolved.event_type_path.map(str::to_owned),
        verify_token: resolved.verify_token,
    })
}

fn fields(c: &Checked, app: &AppId) -> SourceFields {
    SourceFields {
        name: c.name.clone(),
        provider: c.provider.clone(),
        // Without a signature to check, the URL's token is the credential.
        allow_unverified: c.provider == hookgate_shared::source::Provider::None,
        public_url: None,
        idempotency: c.idempotency.clone(),
        mode: Mode::Async,
        app_id: app.clone(),
        event_type_path: c.event_type_path.clone(),
        retention_days: None,
        disabled: false,
    }
}

async fn find(state: &AppState, tenant: &TenantId, id: &Ref<SourceId>) -> Result<Source, ApiError> {
    let conn = db::conn(&state.db).await?;
    ingest_sources::get(&**conn, tenant, id).await?.ok_or(ApiError::NotFound("ingest source"))
}

/// Lists the tenant's ingest sources.
#[utoipa::path(params(PageQuery), tag = "Ingest Source", operation_id = "v1.ingest.source.list", responses((status = 200, body = Page<IngestSourceOut>)))]
#[get("/source")]
async fn list(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page = ingest_sources::list(&**conn, &key.0, &q.page::<SourceId>()?).await?;
    let mut data = Vec::with_capacity(page.data.len());
    for s in page.data {
        data.push(out(&req, &state, s)?);
    }
    Ok(HttpResponse::Ok().json(Page {
        data,
        iterator: page.iterator,
        prev_iterator: page.prev_iterator,
        done: page.done,
    }))
}

/// Creates the source and its application (which holds its endpoints) in one commit.
async fn insert(
    state: &AppState,
    req: &HttpRequest,
    tenant: &TenantId,
    c: &Checked,
    key: Option<&RequestKey>,
) -> Result<HttpResponse, ApiError> {
    let id = SourceId::generate();
    let cap = crate::quota::app_cap(state, tenant).await?;
    let token = secrets::new_ingest_token();
    let sealed_token = secrets::seal_token(state, tenant, &id, &token);
    let hash = state.api_keys.hash(&token);
    let sealed_secret = c.secret.as_ref().map(|s| secrets::seal(state, tenant, &id, s));
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let made =
        ApplicationFields { uid: None, name: format!("ingest: {}", c.name), throttle_rate: None, metadata: json!({}) };
    cron_room(&*tx, tenant, c).await?;
    // An ingest source's application counts against `appsPerTenant` like any.
    let app = crate::quota::insert_app(state, &*tx, tenant, &made, cap).await?.id;
    ingest_sources::mark_app(&*tx, tenant, &app, &id).await?;
    let config = stored_config(state, c, None)?;
    let ingest = IngestFields { type_name: c.kind.name, uid: c.uid.as_deref(), metadata: &c.metadata, config: &config };
    let s = ingest_sources::insert(
        &*tx,
        tenant,
        &id,
        &fields(c, &app),
        &ingest,
        sealed_secret.as_deref(),
        &NewToken { sealed: &sealed_token, hash: &hash },
    )
    .await
    .map_err(|e| validate::conflict("an ingest source with this uid")(e.into()))?;
    let res = answer(&*tx, state, key, StatusCode::CREATED, &out(req, state, s)?).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// Creates an ingest source and the application that holds its endpoints.
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.create", responses((status = 201, body = IngestSourceOut)))]
#[post("/source")]
async fn create(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<IngestSourceIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let c = check(&body)?;
    insert(&state, &req, &key.0, &c, request.as_deref()).await
}

/// Gets an ingest source by id or uid.
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.get", responses((status = 200, body = IngestSourceOut)))]
#[get("/source/{source_id}")]
async fn get_one(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<Ref<SourceId>>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(&req, &state, find(&state, &key.0, &id).await?)?))
}

/// PUT: replaces the source's name, uid, metadata, type and config (its token
/// and endpoints stay), or creates it with the path as its `uid` (201).
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.update", responses((status = 200, body = IngestSourceOut), (status = 201, description = "created under the path as its uid", body = IngestSourceOut)))]
#[put("/source/{source_id}")]
async fn upsert(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<Ref<SourceId>>,
    body: web::Json<IngestSourceIn>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let Some(s) = ingest_sources::get_for_update(&*tx, &key.0, &id).await? else {
        drop(tx);
        let mut c = check(&body)?;
        let Some(uid) = id.creatable_uid() else { return Err(ApiError::NotFound("ingest source")) };
        c.uid = Some(c.uid.unwrap_or_else(|| uid.to_owned()));
        return insert(&state, &req, &key.0, &c, None).await;
    };
    // Answers never show a secret, so a read-modify-write sends none back: the
    // type staying, the stored secret stays (an explicit `"secret": null` drops it).
    let mut body = body.into_inner();
    let same_type = s.ingest.as_ref().is_some_and(|i| i.type_name == body.kind);
    let config = body.config.get_or_insert_with(|| json!({}));
    let mut kept = false;
    // Each type names its credential (`secret`, Telnyx's `publicKey`, Adobe Sign's `clientId`).
    let field = IngestType::parse(&body.kind).map(|k| k.credential_field()).unwrap_or("secret");
    if let (true, Some(map)) = (same_type, config.as_object_mut()) {
        if !map.contains_key(field) {
            let stored = secrets::valid_secrets(&state, &s).map_err(ApiError::Internal)?;
            if let Some(secret) = stored.into_iter().next() {
                map.insert(field.into(), json!(secret));
                kept = true;
            }
        }
    }
    let c = check(&body)?;
    if !same_type {
        cron_room(&*tx, &key.0, &c).await?;
    }
    // A kept secret is not written again (a rotation's grace stays); a new one, or
    // a new type, ends the grace of the previous secret.
    let sealed_secret = match kept {
        true => None,
        false => c.secret.as_ref().map(|secret| secrets::seal(&state, &key.0, &s.id, secret)),
    };
    let kept_hash = s.ingest.as_ref().filter(|_| same_type).and_then(|i| i.config.get(secrets::VERIFY_TOKEN_HASH));
    let config = stored_config(&state, &c, kept_hash)?;
    let ingest = IngestFields { type_name: c.kind.name, uid: c.uid.as_deref(), metadata: &c.metadata, config: &config };
    // What the source API set (sync mode, a retention; the type staying, an
    // idempotency rule and event type path) stays.
    let mut f = fields(&c, &s.app_id);
    (f.mode, f.retention_days, f.disabled) = (s.mode, s.retention_days, s.disabled);
    if same_type {
        (f.idempotency, f.event_type_path) = (s.idempotency.clone(), s.event_type_path.clone());
    }
    let saved = ingest_sources::replace(&*tx, &key.0, &s.id, &f, &ingest, sealed_secret.as_deref(), &state.caches)
        .await
        .map_err(|e| validate::conflict("an ingest source with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("ingest source"))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(out(&req, &state, saved)?))
}

/// Erases the source's application, and the source with it: the source is
/// disabled at once (its URL answers 404), then its events, messages, endpoints
/// and itself go, in bounded steps the pruners finish if this request cannot
/// (204, or 202 while a large one is erased; a retry carries on).
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.delete", responses((status = 204, description = "erased"), (status = 202, body = crate::v1::applications::Erasing)))]
#[delete("/source/{source_id}")]
async fn delete_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<Ref<SourceId>>,
) -> Result<HttpResponse, ApiError> {
    let s = find(&state, &key.0, &id).await?;
    crate::v1::applications::erase(&state, &key.0, &s.app_id).await
}

/// A new token for the `ingestUrl`; the previous one still opens the source for
/// 48 hours, and at most three rotated-out tokens are open at once (409 beyond).
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.rotate-token", responses((status = 200, body = RotateTokenOut)))]
#[post("/source/{source_id}/token/rotate")]
async fn rotate_token(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<Ref<SourceId>>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let s = ingest_sources::get_for_update(&*tx, &key.0, &id).await?.ok_or(ApiError::NotFound("ingest source"))?;
    let ingest = s.ingest.as_ref().ok_or(ApiError::NotFound("ingest source"))?;
    let now = Utc::now();
    if ingest.old_tokens.iter().filter(|t| t.until > now).count() >= MOST_OLD_TOKENS {
        return Err(ApiError::Conflict(format!(
            "the token was rotated {MOST_OLD_TOKENS} times in the last {TOKEN_GRACE_HOURS} hours; \
             wait until the oldest rotated-out token expires"
        )));
    }
    let old = ingest_sources::after_rotation(
        &ingest.old_tokens,
        &ingest.token_hash,
        now,
        now + Duration::hours(TOKEN_GRACE_HOURS),
    );
    let token = secrets::new_ingest_token();
    let sealed = secrets::seal_token(&state, &key.0, &s.id, &token);
    let hash = state.api_keys.hash(&token);
    ingest_sources::rotate_token(&*tx, &key.0, &s.id, &NewToken { sealed: &sealed, hash: &hash }, &old, &state.caches)
        .await?;
    let body = RotateTokenOut { ingest_url: ingest_url(&req, &state, &s.id, &token) };
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::OK, &body).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}
