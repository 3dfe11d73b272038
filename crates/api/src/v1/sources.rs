//! `/api/v1/source`: create, list, get, patch, delete, get and rotate the secret.

use crate::idempotency::{answer, RequestKey};
use crate::{optional_json, KeyAuth, Maybe, PageQuery};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::{page::Page, StoreError};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref, SourceId, TenantId},
    source::{parse_public_url, HmacSpec, KeySpec, Mode, Provider},
    store::{
        applications,
        sources::{self, Source, SourceFields},
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_postgres::GenericClient;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use hookgate_ingress::{secrets, verify};

use super::validate::RotateIn;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(patch_one).service(delete_one);
    cfg.service(get_secret).service(rotate_secret);
}

/// A source to create: where it receives, how it verifies, and where its events go.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourceIn {
    name: String,
    provider: String,
    secret: Option<String>,
    /// How events are keyed for dedupe; absent or `null`: the provider's own key.
    idempotency: Option<Value>,
    mode: Option<String>,
    app_id: String,
    event_type_path: Option<String>,
    /// Days inbound events are kept; also the dedupe window. Absent or `null`
    /// follows the tenant's retention.
    retention: Option<i32>,
    hmac: Option<HmacSpec>,
    /// The URL the provider signs (Twilio, Square, HubSpot), when it is not `url`
    /// (a proxy or another hostname in front of Hookgate).
    public_url: Option<String>,
    /// Required with provider `none`: no verification, for trusted networks only.
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    allow_unverified: bool,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    disabled: bool,
}

/// The fields of a source to change: absent leaves one alone, `null` clears it.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SourcePatch {
    name: Option<String>,
    #[serde(default)]
    idempotency: Maybe<Value>,
    mode: Option<String>,
    app_id: Option<String>,
    #[serde(default)]
    event_type_path: Maybe<String>,
    /// `null` makes the source follow its tenant's retention again.
    #[serde(default)]
    retention: Maybe<i32>,
    hmac: Option<HmacSpec>,
    #[serde(default)]
    public_url: Maybe<String>,
    allow_unverified: Option<bool>,
    disabled: Option<bool>,
}

/// A source: its URL, provider and settings.
#[derive(Serialize, ToSchema)]
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
    /// Days its inbound events are kept (the dedupe window), wherever it is set.
    retention: i32,
    /// Whether `retention` is the tenant's (or the operator's default), not the source's own.
    retention_inherited: bool,
    /// The generic `hmac` provider's options.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = HmacSpec)]
    hmac: Option<Value>,
    /// Set only for providers that sign the URL; `null` there means `url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    public_url: Option<Option<String>>,
    allow_unverified: bool,
    disabled: bool,
    /// An ingest source's type, as the Svix SDK names it (docs/ingest.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    ingest_type: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// A source's signing secret (`null` when it has none).
#[derive(Serialize, ToSchema)]
struct SourceSecretOut {
    key: Option<String>,
}

fn out(req: &HttpRequest, state: &AppState, s: Source) -> SourceOut {
    let retention = s.retention(state.config.retention_inbound_days);
    let mut url = hookgate_shared::http::source_url(req, &state.config, &s.id);
    // An ingest source's door is its `ingestUrl` (the token opened here; a
    // token that cannot be opened leaves the plain door, which answers 404).
    if let Ok(Some(token)) = secrets::open_token(state, &s) {
        url = format!("{url}/{token}");
    }
    SourceOut {
        url,
        id: s.id.to_string(),
        name: s.name,
        provider: s.provider.name().to_owned(),
        idempotency: s.idempotency.to_json(),
        mode: s.mode.as_str().to_owned(),
        app_id: s.app_id.to_string(),
        event_type_path: s.event_type_path,
        retention,
        retention_inherited: s.retention_days.is_none(),
        hmac: s.provider.hmac().map(|h| serde_json::to_value(h).expect("an hmac spec serialises")),
        public_url: s.provider.signs_url().then(|| s.public_url.clone()),
        allow_unverified: s.allow_unverified,
        disabled: s.disabled,
        ingest_type: s.ingest.as_ref().map(|i| i.type_name.clone()),
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

/// Validates the request's fields into what is stored.
async fn fields(db: &impl GenericClient, tenant: &TenantId, b: &SourceIn) -> Result<SourceFields, ApiError> {
    if b.name.trim().is_empty() || b.name.len() > 256 {
        return Err(ApiError::Validation("`name` must be 1 to 256 characters".into()));
    }
    let hmac = b.hmac.as_ref().map(|h| serde_json::to_value(h).expect("an hmac spec serialises"));
    let provider = Provider::parse(&b.provider, hmac.as_ref()).map_err(ApiError::Validation)?;
    if provider == Provider::None && !b.allow_unverified {
        return Err(ApiError::Validation(
            "provider `none` verifies nothing: set `allowUnverified: true` to confirm, for trusted networks only"
                .into(),
        ));
    }
    let public_url = match (&b.public_url, provider.signs_url()) {
        (None, _) => None,
        (Some(u), true) => Some(parse_public_url(u).map_err(ApiError::Validation)?),
        (Some(_), false) => {
            return Err(ApiError::Validation(format!(
                "`publicUrl` is for providers that sign the URL (twilio, square, hubspot), not `{}`",
                provider.name()
            )))
        }
    };
    let idempotency = KeySpec::parse(b.idempotency.as_ref()).map_err(ApiError::Validation)?;
    if let Some(why) = verify::preset(&provider).door.own_key_only {
        if !matches!(idempotency, KeySpec::Provider) {
            return Err(ApiError::Validation(format!("`idempotency`: a {} source {why}", provider.name())));
        }
    }
    let mode = b.mode.as_deref().map(Mode::parse).transpose().map_err(ApiError::Validation)?.unwrap_or_default();
    if let Some(p) = &b.event_type_path {
        if !p.starts_with('/') {
            return Err(ApiError::Validation("`eventTypePath` must be a JSON pointer starting with `/`".into()));
        }
    }
    if b.retention.is_some_and(|r| !(1..=90).contains(&r)) {
        return Err(ApiError::Validation("`retention` must be 1 to 90 days, or null to follow the tenant's".into()));
    }
    let app_ref = Ref::<AppId>::parse(&b.app_id).map_err(|e| ApiError::Validation(format!("`appId`: {e}")))?;
    let app = applications::get(db, tenant, &app_ref)
        .await?
        .ok_or_else(|| ApiError::Validation(format!("`appId`: no application `{}`", b.app_id)))?;
    Ok(SourceFields {
        name: b.name.trim().to_owned(),
        provider,
        allow_unverified: b.allow_unverified,
        public_url,
        idempotency,
        mode,
        app_id: app.id,
        event_type_path: b.event_type_path.clone(),
        retention_days: b.retention,
        disabled: b.disabled,
    })
}

async fn find(state: &AppState, tenant: &TenantId, id: &SourceId) -> Result<Source, ApiError> {
    let conn = db::conn(&state.db).await?;
    sources::get(&**conn, tenant, id).await?.ok_or(ApiError::NotFound("source"))
}

/// Creates a source; its secret is generated unless given.
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.create", responses((status = 201, body = SourceOut)))]
#[post("/source")]
async fn create(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SourceIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let f = {
        let conn = db::conn(&state.db).await?;
        fields(&**conn, &key.0, &body).await?
    };
    // Their senders check the URL with a GET before they send, which only an
    // ingest source's URL answers.
    if verify::preset(&f.provider).door.url_check.is_some() {
        return Err(ApiError::Validation(format!(
            "provider `{}`: its sender checks the URL before it sends; create it as an ingest source \
             (`POST /ingest/api/v1/source`, docs/ingest.md)",
            f.provider.name()
        )));
    }
    let id = SourceId::generate();
    let sealed = match f.provider.needs_secret() {
        true => {
            let secret = match &body.secret {
                Some(s) => secrets::check(&f.provider, s).map_err(ApiError::Validation)?,
                None => secrets::generate(&f.provider).map_err(ApiError::Validation)?,
            };
            Some(secrets::seal(&state, &key.0, &id, &secret))
        }
        false => None,
    };
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let s = sources::insert(&*tx, &key.0, &id, &f, sealed.as_deref()).await?;
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::CREATED, &out(&req, &state, s)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// Lists the tenant's sources.
#[utoipa::path(params(PageQuery), tag = "Source", operation_id = "hookgate.source.list", responses((status = 200, body = Page<SourceOut>)))]
#[get("/source")]
async fn list(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page = sources::list(&**conn, &key.0, &q.page::<SourceId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(|s| out(&req, &state, s))))
}

/// Gets a source.
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.get", responses((status = 200, body = SourceOut)))]
#[get("/source/{source_id}")]
async fn get_one(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(&req, &state, find(&state, &key.0, &id).await?)))
}

/// Changes the fields the body gives; the provider and secret stay.
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.patch", responses((status = 200, body = SourceOut)))]
#[patch("/source/{source_id}")]
async fn patch_one(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
    body: web::Json<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    // Read, merged and written under the row's lock: a concurrent PATCH of
    // another field is kept.
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let s = sources::get_for_update(&*tx, &key.0, &id).await?.ok_or(ApiError::NotFound("source"))?;
    if s.ingest.is_some() && p.app_id.as_ref().is_some_and(|a| *a != s.app_id.to_string()) {
        return Err(ApiError::Validation(
            "`appId`: an ingest source's endpoints are its own application's; it cannot move".into(),
        ));
    }
    if s.ingest.is_some() && matches!(p.public_url, Maybe::Value(_)) {
        return Err(ApiError::Validation(
            "`publicUrl`: an ingest source is signed at its `ingestUrl`, whose token rotates".into(),
        ));
    }
    let merged = SourceIn {
        name: p.name.unwrap_or(s.name),
        provider: s.provider.name().to_owned(),
        secret: None,
        // A source stored with a rule of its own where its provider now takes only
        // its own key (paypal) is patched back to it unless the patch names one.
        idempotency: p.idempotency.into_update().unwrap_or_else(|| {
            match verify::preset(&s.provider).door.own_key_only {
                Some(_) => None,
                None => s.idempotency.to_json(),
            }
        }),
        mode: Some(p.mode.unwrap_or_else(|| s.mode.as_str().to_owned())),
        app_id: p.app_id.unwrap_or_else(|| s.app_id.to_string()),
        event_type_path: p.event_type_path.into_update().unwrap_or(s.event_type_path),
        retention: p.retention.into_update().unwrap_or(s.retention_days),
        hmac: p.hmac.or_else(|| s.provider.hmac().cloned()),
        public_url: p.public_url.into_update().unwrap_or(s.public_url),
        allow_unverified: p.allow_unverified.unwrap_or(s.allow_unverified),
        disabled: p.disabled.unwrap_or(s.disabled),
    };
    let f = fields(&*tx, &key.0, &merged).await?;
    let saved = sources::replace(&*tx, &key.0, &s.id, &f, &state.caches).await?.ok_or(ApiError::NotFound("source"))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(out(&req, &state, saved)))
}

/// Deletes a source; an ingest source goes with its application (202 while a
/// large one is erased).
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.delete", responses((status = 204, description = "deleted"), (status = 202, description = "an ingest source's application is being erased", body = crate::v1::applications::Erasing)))]
#[delete("/source/{source_id}")]
async fn delete_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
) -> Result<HttpResponse, ApiError> {
    let s = find(&state, &key.0, &id).await?;
    if s.ingest.is_some() {
        // An ingest source goes with its own application, as the ingest API deletes it.
        return super::applications::erase(&state, &key.0, &s.app_id).await;
    }
    let mut conn = db::conn(&state.db).await?;
    if !sources::delete(&mut **conn, &key.0, &s.id, &state.caches).await? {
        return Err(ApiError::NotFound("source"));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// Gets the source's current signing secret.
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.get-secret", responses((status = 200, body = SourceSecretOut)))]
#[get("/source/{source_id}/secret")]
async fn get_secret(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
) -> Result<HttpResponse, ApiError> {
    let s = find(&state, &key.0, &id).await?;
    let valid = secrets::valid_secrets(&state, &s).map_err(ApiError::Internal)?;
    Ok(HttpResponse::Ok().json(SourceSecretOut { key: valid.into_iter().next() }))
}

/// Rotates the source's secret: the previous one is still accepted for the grace
/// period (24 h by default).
#[utoipa::path(tag = "Source", operation_id = "hookgate.source.rotate-secret", request_body = Option<RotateIn>, responses((status = 200, body = SourceSecretOut)))]
#[post("/source/{source_id}/secret/rotate")]
async fn rotate_secret(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
    body: web::Bytes,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body: RotateIn = optional_json(&body)?;
    let until = body.old_secret_until()?;
    let s = find(&state, &key.0, &id).await?;
    if !s.provider.needs_secret() {
        return Err(ApiError::Validation("a source of provider `none` has no secret".into()));
    }
    let secret = match &body.key {
        Some(k) => secrets::check(&s.provider, k).map_err(ApiError::Validation)?,
        None => secrets::generate(&s.provider).map_err(ApiError::Validation)?,
    };
    let sealed = secrets::seal(&state, &key.0, &s.id, &secret);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !sources::rotate_secret(&*tx, &key.0, &s.id, &sealed, until, &state.caches).await? {
        // Deleted meanwhile: no key was stored, so none is answered (or kept for replay).
        return Err(ApiError::NotFound("source"));
    }
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::OK, &SourceSecretOut { key: Some(secret) }).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}
