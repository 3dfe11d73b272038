//! `/api/v1/source`: create, list, get, patch, delete, get and rotate the secret.

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use hookgate_shared::{
    db,
    http::{optional_json, ApiError, KeyAuth, Maybe, PageQuery},
    ids::{SourceId, TenantId},
    store::{
        applications,
        sources::{self, Source, SourceFields},
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{
    extract::KeySpec,
    verify::{HmacSpec, Provider},
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(patch_one).service(delete_one);
    cfg.service(get_secret).service(rotate_secret);
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourceIn {
    name: String,
    provider: String,
    secret: Option<String>,
    idempotency: Option<Value>,
    mode: Option<String>,
    app_id: String,
    event_type_path: Option<String>,
    /// Days inbound events are kept; also the dedupe window.
    retention: Option<i32>,
    hmac: Option<HmacSpec>,
    /// Required with provider `none`: no verification, for trusted networks only.
    #[serde(default)]
    allow_unverified: bool,
    #[serde(default)]
    disabled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourcePatch {
    name: Option<String>,
    #[serde(default)]
    idempotency: Maybe<Value>,
    mode: Option<String>,
    app_id: Option<String>,
    #[serde(default)]
    event_type_path: Maybe<String>,
    retention: Option<i32>,
    hmac: Option<HmacSpec>,
    allow_unverified: Option<bool>,
    disabled: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceOut {
    id: String,
    url: String,
    name: String,
    provider: String,
    idempotency: Option<Value>,
    mode: String,
    app_id: String,
    event_type_path: Option<String>,
    retention: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    hmac: Option<Value>,
    allow_unverified: bool,
    disabled: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn out(req: &HttpRequest, s: Source) -> SourceOut {
    let info = req.connection_info();
    SourceOut {
        url: format!("{}://{}/in/{}", info.scheme(), info.host(), s.id),
        id: s.id.to_string(),
        name: s.name,
        provider: s.provider,
        idempotency: s.idempotency,
        mode: s.mode,
        app_id: s.app_id.to_string(),
        event_type_path: s.event_type_path,
        retention: s.retention_days,
        hmac: s.verify.get("hmac").cloned(),
        allow_unverified: s.verify.get("allowUnverified").and_then(Value::as_bool).unwrap_or(false),
        disabled: s.disabled,
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

fn purpose(id: &SourceId) -> String {
    format!("source-secret:{id}")
}

fn seal(state: &AppState, tenant: &TenantId, id: &SourceId, secret: &str) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&purpose(id), secret.as_bytes())
}

/// The secrets a request may be signed with: the current one, and the previous
/// one during its grace period.
pub fn source_secrets(state: &AppState, s: &Source) -> Result<Vec<String>, String> {
    let key = state.config.master_key.tenant_key(&s.tenant_id);
    let open = |sealed: &[u8]| {
        key.open(&purpose(&s.id), sealed).map(|b| String::from_utf8_lossy(&b).into_owned()).map_err(|e| e.to_string())
    };
    let mut out = Vec::new();
    if let Some(sealed) = &s.secret {
        out.push(open(sealed)?);
    }
    if let (Some(old), Some(until)) = (&s.old_secret, s.old_secret_until) {
        if until > Utc::now() {
            out.push(open(old)?);
        }
    }
    Ok(out)
}

fn new_secret(provider: &str) -> String {
    if provider == "standard-webhooks" {
        hookgate_egress::signing::generate_secret()
    } else {
        format!("hgsec_{}", hookgate_shared::crypto::random_hex(24))
    }
}

fn check_secret(provider: &str, secret: &str) -> Result<String, ApiError> {
    if provider == "standard-webhooks" {
        return hookgate_egress::signing::normalise_secret(secret).map_err(|e| ApiError::Validation(e.to_string()));
    }
    if secret.is_empty() || secret.len() > 512 {
        return Err(ApiError::Validation("`secret` must be 1 to 512 characters".into()));
    }
    Ok(secret.to_owned())
}

/// Validates the request's fields into what is stored.
async fn fields(state: &AppState, tenant: &TenantId, b: &SourceIn) -> Result<SourceFields, ApiError> {
    if b.name.trim().is_empty() || b.name.len() > 256 {
        return Err(ApiError::Validation("`name` must be 1 to 256 characters".into()));
    }
    let mut verify = serde_json::Map::new();
    if let Some(h) = &b.hmac {
        verify.insert("hmac".into(), serde_json::to_value(h).expect("serialisable"));
    }
    if b.allow_unverified {
        verify.insert("allowUnverified".into(), json!(true));
    }
    let verify = Value::Object(verify);
    let provider = Provider::parse(&b.provider, &verify).map_err(ApiError::Validation)?;
    if provider == Provider::None && !b.allow_unverified {
        return Err(ApiError::Validation(
            "provider `none` verifies nothing: set `allowUnverified: true` to confirm, for trusted networks only"
                .into(),
        ));
    }
    KeySpec::parse(b.idempotency.as_ref()).map_err(ApiError::Validation)?;
    let mode = b.mode.clone().unwrap_or_else(|| "async".into());
    if mode != "async" && mode != "sync" {
        return Err(ApiError::Validation("`mode` must be `async` or `sync`".into()));
    }
    if let Some(p) = &b.event_type_path {
        if !p.starts_with('/') {
            return Err(ApiError::Validation("`eventTypePath` must be a JSON pointer starting with `/`".into()));
        }
    }
    let retention = b.retention.unwrap_or(30);
    if !(1..=90).contains(&retention) {
        return Err(ApiError::Validation("`retention` must be 1 to 90 days".into()));
    }
    let conn = db::conn(&state.db).await?;
    let app = applications::get(&**conn, tenant, &b.app_id)
        .await?
        .ok_or_else(|| ApiError::Validation(format!("`appId`: no application `{}`", b.app_id)))?;
    Ok(SourceFields {
        name: b.name.trim().to_owned(),
        provider: b.provider.clone(),
        verify,
        idempotency: b.idempotency.clone().filter(|v| !v.is_null()),
        mode,
        app_id: app.id,
        event_type_path: b.event_type_path.clone(),
        retention_days: retention,
        disabled: b.disabled,
    })
}

async fn find(state: &AppState, tenant: &TenantId, id: &str) -> Result<Source, ApiError> {
    let conn = db::conn(&state.db).await?;
    sources::get(&**conn, tenant, id).await?.ok_or(ApiError::NotFound("source"))
}

#[post("/source")]
async fn create(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SourceIn>,
) -> Result<HttpResponse, ApiError> {
    let f = fields(&state, &key.0, &body).await?;
    let id = SourceId::generate();
    let sealed = match Provider::parse(&f.provider, &f.verify).map_err(ApiError::Validation)?.needs_secret() {
        true => {
            let secret = match &body.secret {
                Some(s) => check_secret(&f.provider, s)?,
                None => new_secret(&f.provider),
            };
            Some(seal(&state, &key.0, &id, &secret))
        }
        false => None,
    };
    let conn = db::conn(&state.db).await?;
    let s = sources::insert(&**conn, &key.0, &id, &f, sealed.as_deref()).await?;
    Ok(HttpResponse::Created().json(out(&req, s)))
}

#[get("/source")]
async fn list(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page = sources::list(&**conn, &key.0, &q.page()).await?;
    Ok(HttpResponse::Ok().json(page.map(|s| out(&req, s))))
}

#[get("/source/{id}")]
async fn get_one(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(&req, find(&state, &key.0, &id).await?)))
}

#[patch("/source/{id}")]
async fn patch_one(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    let s = find(&state, &key.0, &id).await?;
    let merged = SourceIn {
        name: p.name.unwrap_or(s.name),
        provider: s.provider,
        secret: None,
        idempotency: p.idempotency.into_update().unwrap_or(s.idempotency),
        mode: Some(p.mode.unwrap_or(s.mode)),
        app_id: p.app_id.unwrap_or_else(|| s.app_id.to_string()),
        event_type_path: p.event_type_path.into_update().unwrap_or(s.event_type_path),
        retention: Some(p.retention.unwrap_or(s.retention_days)),
        hmac: p.hmac.or_else(|| s.verify.get("hmac").and_then(|h| serde_json::from_value(h.clone()).ok())),
        allow_unverified: p
            .allow_unverified
            .unwrap_or_else(|| s.verify.get("allowUnverified").and_then(Value::as_bool).unwrap_or(false)),
        disabled: p.disabled.unwrap_or(s.disabled),
    };
    let f = fields(&state, &key.0, &merged).await?;
    let conn = db::conn(&state.db).await?;
    let saved = sources::replace(&**conn, &key.0, &s.id, &f).await?.ok_or(ApiError::NotFound("source"))?;
    state.caches.sources.clear();
    Ok(HttpResponse::Ok().json(out(&req, saved)))
}

#[delete("/source/{id}")]
async fn delete_one(key: KeyAuth, state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let s = find(&state, &key.0, &id).await?;
    let conn = db::conn(&state.db).await?;
    if !sources::delete(&**conn, &key.0, &s.id).await? {
        return Err(ApiError::NotFound("source"));
    }
    state.caches.sources.clear();
    Ok(HttpResponse::NoContent().finish())
}

#[get("/source/{id}/secret")]
async fn get_secret(key: KeyAuth, state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let s = find(&state, &key.0, &id).await?;
    let secrets = source_secrets(&state, &s).map_err(ApiError::Internal)?;
    Ok(HttpResponse::Ok().json(json!({ "key": secrets.first() })))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RotateIn {
    key: Option<String>,
    grace_period_seconds: Option<i64>,
}

/// The previous secret is still accepted for the grace period (24 h by default).
#[post("/source/{id}/secret/rotate")]
async fn rotate_secret(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: RotateIn = optional_json(&body)?;
    let grace = body.grace_period_seconds.unwrap_or(86_400);
    if !(0..=604_800).contains(&grace) {
        return Err(ApiError::Validation("`gracePeriodSeconds` must be between 0 and 604800".into()));
    }
    let s = find(&state, &key.0, &id).await?;
    if s.provider == "none" {
        return Err(ApiError::Validation("a source of provider `none` has no secret".into()));
    }
    let secret = match &body.key {
        Some(k) => check_secret(&s.provider, k)?,
        None => new_secret(&s.provider),
    };
    let sealed = seal(&state, &key.0, &s.id, &secret);
    let conn = db::conn(&state.db).await?;
    sources::rotate_secret(&**conn, &key.0, &s.id, &sealed, Utc::now() + Duration::seconds(grace)).await?;
    state.caches.sources.clear();
    Ok(HttpResponse::Ok().json(json!({ "key": secret })))
}
