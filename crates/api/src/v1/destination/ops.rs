//! `v1.destination.*` beyond CRUD: attempts, headers, secret, and a destination's progress
//! (next and last acknowledged event, skip, force-retry), mapped as docs/api-surface.md says.

use std::collections::{BTreeMap, HashMap};

use actix_web::{get, http::StatusCode, patch, post, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::destinations::config::Config;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, AttemptId, EndpointId, MessageId, Ref},
    status::{DeliveryStatus, EndpointKind},
    store::{
        attempts::{self, Attempt, AttemptFilter, Scope},
        destination_ops::{self as ops, SkipTo, Skipped},
        endpoints::{self, DestinationFields, Endpoint},
        messages,
        page::Page,
        sinks::{Logged, Position},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::{answer_empty, RequestKey};
use crate::v1::destination::crud::find;
use crate::v1::endpoint::headers::{check_headers, values_hidden, EndpointHeadersOut};
use crate::v1::endpoint::secret::{secret_answer, EndpointSecretOut};
use crate::{optional_json, PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(attempt_list)
        .service(attempt_get)
        .service(get_headers)
        .service(patch_headers)
        .service(get_secret)
        .service(next_event)
        .service(last_acked_event)
        .service(skip)
        .service(force_retry);
}

type DestPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// One attempt to hand a destination a message (Svix's `DestinationAttemptOut`).
/// Hookgate records an attempt per message, a FIFO batch's as one per message
/// of the batch: `numEvents` is 1, `firstMsgId` and `lastMsgId` the message.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DestinationAttemptOut {
    id: String,
    destination_id: String,
    status: DeliveryStatus,
    #[schema(example = "success")]
    status_text: &'static str,
    first_msg_id: Option<String>,
    last_msg_id: Option<String>,
    num_events: i32,
    response_duration_ms: i64,
    timestamp: DateTime<Utc>,
}

impl From<Attempt> for DestinationAttemptOut {
    fn from(a: Attempt) -> Self {
        DestinationAttemptOut {
            id: a.id.to_string(),
            destination_id: a.endpoint_id.to_string(),
            status: a.status,
            status_text: a.status.text(),
            first_msg_id: Some(a.msg_id.to_string()),
            last_msg_id: Some(a.msg_id.to_string()),
            num_events: 1,
            response_duration_ms: a.response_duration_ms,
            timestamp: a.created_at,
        }
    }
}

/// `?status=&before=&after=&withContent=`: which attempts to list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct DestinationAttemptQuery {
    status: Option<i16>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    before: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
    /// Accepted: an attempt here carries no response body to leave out.
    #[allow(dead_code)]
    with_content: Option<bool>,
}

/// The destination's attempts, newest first.
#[utoipa::path(params(PageQuery, DestinationAttemptQuery), tag = "Destination", operation_id = "v1.destination.attempt.list", responses((status = 200, body = Page<DestinationAttemptOut>)))]
#[get("/app/{app_id}/destination/{destination_id}/attempt")]
async fn attempt_list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: DestPath,
    page: web::Query<PageQuery>,
    q: web::Query<DestinationAttemptQuery>,
) -> Result<HttpResponse, ApiError> {
    let filter = AttemptFilter {
        status: crate::v1::attempts::status_filter(q.status)?,
        before: q.before,
        // Svix's `after` is "at or after"; the store's is strictly after.
        after: q.after.map(|a| a - chrono::Duration::microseconds(1)),
        ..AttemptFilter::default()
    };
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    let found =
        attempts::list(&**conn, &tenant.0, &app, Scope::Endpoint(&ep.id), &page.page::<AttemptId>()?, &filter).await?;
    Ok(HttpResponse::Ok().json(found.map(DestinationAttemptOut::from)))
}

/// One of the destination's attempts.
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.attempt.get", responses((status = 200, body = DestinationAttemptOut)))]
#[get("/app/{app_id}/destination/{destination_id}/attempt/{attempt_id}")]
async fn attempt_get(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>, AttemptId)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    let found = attempts::get_for_endpoint(&**conn, &tenant.0, &app, &ep.id, &path.2)
        .await?
        .ok_or(ApiError::NotFound("attempt"))?;
    Ok(HttpResponse::Ok().json(DestinationAttemptOut::from(found)))
}

fn open(state: &AppState, tenant: &TenantAuth, app: &AppId, ep: &Endpoint) -> Result<Config, ApiError> {
    let sealed = ep.destination.as_deref().ok_or(ApiError::NotFound("destination"))?;
    Config::open(state, &tenant.0, app, &ep.id, sealed)
        .map_err(|e| ApiError::Internal(format!("a destination's configuration cannot be opened: {e}")))
}

/// Only a FIFO endpoint sends HTTP requests with headers of its own.
fn fifo_headers(config: &Config) -> Result<BTreeMap<String, String>, ApiError> {
    match config {
        Config::FifoEndpoint(f) => Ok(f.headers.clone().unwrap_or_default()),
        _ => Err(ApiError::Validation(
            "only a `fifoEndpoint` destination (the HTTP one) has headers: this one's are in its `config`".into(),
        )),
    }
}

fn headers_out(all: BTreeMap<String, String>, names_only: bool) -> EndpointHeadersOut {
    let sensitive =
        |k: &str| names_only || hookgate_egress::secrets::SENSITIVE_HEADERS.contains(&k.to_ascii_lowercase().as_str());
    let (hidden, shown): (BTreeMap<_, _>, BTreeMap<_, _>) = all.into_iter().partition(|(k, _)| sensitive(k));
    EndpointHeadersOut::new(shown, hidden.into_keys().collect())
}

/// A FIFO endpoint's headers; credential-like ones (and, for some portal links, all) by name only.
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.headers-get", responses((status = 200, body = EndpointHeadersOut)))]
#[get("/app/{app_id}/destination/{destination_id}/headers")]
async fn get_headers(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: DestPath,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let names_only = values_hidden(&req, &state, &tenant.0).await?;
    let headers = fifo_headers(&open(&state, &tenant, &app, &ep)?)?;
    Ok(HttpResponse::Ok().json(headers_out(headers, names_only)))
}

/// Headers to set on a FIFO endpoint; a `null` value removes one (Svix's `HttpSinkHeadersPatchIn`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HttpSinkHeadersPatchIn)]
struct HeadersPatchIn {
    headers: HashMap<String, Option<String>>,
}

/// Merges headers into a FIFO endpoint's; answers them as `headers-get` does.
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.headers-patch", responses((status = 200, body = EndpointHeadersOut)))]
#[patch("/app/{app_id}/destination/{destination_id}/headers")]
async fn patch_headers(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: DestPath,
    body: web::Json<HeadersPatchIn>,
) -> Result<HttpResponse, ApiError> {
    check_headers(&body.headers)?;
    let (app, found) = find(&state, &tenant, &path.0, &path.1).await?;
    let guard = crate::v1::endpoint::crud::allowed(&state, &tenant.0).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let ep = endpoints::get_for_update(&*tx, &tenant.0, &app, &found.id)
        .await?
        .filter(|e| e.kind.is_destination())
        .ok_or(ApiError::NotFound("destination"))?;
    let stored = open(&state, &tenant, &app, &ep)?;
    fifo_headers(&stored)?;
    // Given as a config patch: the stored values stay where the patch names
    // nothing (Config::patched keeps a credential it redacts for the merge).
    let mut headers = serde_json::Map::new();
    let Config::FifoEndpoint(f) = &stored else { unreachable!("checked by fifo_headers") };
    for (k, v) in f.headers.iter().flatten() {
        let secret = hookgate_egress::secrets::SENSITIVE_HEADERS.contains(&k.to_ascii_lowercase().as_str());
        headers.insert(k.clone(), json!(if secret { "[redacted]" } else { v.as_str() }));
    }
    for (k, v) in &body.headers {
        headers.retain(|name, _| !name.eq_ignore_ascii_case(k));
        if let Some(v) = v {
            headers.insert(k.clone(), json!(v));
        }
    }
    let config = stored.patched(&json!({ "headers": headers }), &guard).map_err(|e| ApiError::Validation(e.0))?;
    let dest = DestinationFields {
        kind: ep.kind,
        sealed: config.seal(&state, &tenant.0, &app, &ep.id),
        batch_size: ep.batch_size.unwrap_or(1),
        max_wait_secs: ep.max_wait_secs.unwrap_or(0),
        fifo_key: ep.fifo_key.clone(),
    };
    endpoints::set_destination(&*tx, &tenant.0, &app, &ep.id, &dest).await?.ok_or(ApiError::NotFound("destination"))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(headers_out(fifo_headers(&config)?, false)))
}

/// The secret that signs what the destination receives (Svix's `SinkSecretOut`).
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.get-secret", responses((status = 200, body = EndpointSecretOut)))]
#[get("/app/{app_id}/destination/{destination_id}/secret")]
async fn get_secret(tenant: TenantAuth, state: web::Data<AppState>, path: DestPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    secret_answer(&state, &tenant.0, &app, &ep)
}

/// A message as the destination API shows it (Svix's `EventOut`): its payload as text.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EventOut {
    event_type: String,
    /// The payload as sent; `{"expired":true}` once it expired or was expunged.
    payload: String,
    timestamp: DateTime<Utc>,
}

fn event(event_type: String, payload: Option<Vec<u8>>, timestamp: DateTime<Utc>) -> EventOut {
    let payload = match payload {
        Some(p) => String::from_utf8_lossy(&p).into_owned(),
        None => r#"{"expired":true}"#.to_owned(),
    };
    EventOut { event_type, payload, timestamp }
}

fn logged_event(l: Logged) -> EventOut {
    event(l.event_type, l.payload, l.created_at)
}

/// A polling endpoint keeps a position per consumer, not one of its own.
fn no_position(ep: &Endpoint) -> Result<(), ApiError> {
    match ep.kind {
        EndpointKind::PollingEndpoint => Err(ApiError::Validation(
            "a polling endpoint keeps a position per consumer: read it through `…/poller/{sink_id}/consumer/{consumer_id}`"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// The oldest event not yet acknowledged, or the last one acknowledged.
async fn progress_event(
    state: &AppState,
    tenant: &TenantAuth,
    path: &DestPath,
    acked: bool,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(state, tenant, &path.0, &path.1).await?;
    no_position(&ep)?;
    let conn = db::conn(&state.db).await?;
    let found = match (ep.kind, acked) {
        (EndpointKind::FifoEndpoint, false) => {
            ops::fifo_next(&**conn, &tenant.0, &app, &ep.id).await?.map(logged_event)
        }
        (EndpointKind::FifoEndpoint, true) => {
            ops::fifo_last_acked(&**conn, &tenant.0, &app, &ep.id).await?.map(logged_event)
        }
        _ => match ops::queue_message(&**conn, &tenant.0, &app, &ep.id, acked).await? {
            Some(id) => messages::get(&**conn, &tenant.0, &app, &Ref::Id(id))
                .await?
                .map(|m| event(m.event_type, m.payload, m.created_at)),
            None => None,
        },
    };
    Ok(HttpResponse::Ok().json(found.ok_or(ApiError::NotFound("event"))?))
}

/// The oldest event the destination has not acknowledged (404 when none waits).
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.next-event", responses((status = 200, body = EventOut)))]
#[get("/app/{app_id}/destination/{destination_id}/next-event")]
async fn next_event(tenant: TenantAuth, state: web::Data<AppState>, path: DestPath) -> Result<HttpResponse, ApiError> {
    progress_event(&state, &tenant, &path, false).await
}

/// The last event the destination acknowledged (404 before its first).
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.get-last-acked-event", responses((status = 200, body = EventOut)))]
#[get("/app/{app_id}/destination/{destination_id}/last-acked-event")]
async fn last_acked_event(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: DestPath,
) -> Result<HttpResponse, ApiError> {
    progress_event(&state, &tenant, &path, true).await
}

/// Where to skip to (Svix's `SkipParams`): a message id, or the `currentIterator`
/// form `{xid}.{seq}`; none skips everything logged so far.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(as = SkipParams)]
struct SkipIn {
    iterator: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SkipQuery {
    iterator: Option<String>,
}

/// Moves a FIFO endpoint past the message (or iterator) named, or past everything
/// logged so far: what comes before it is not sent. Forward only; 409 while a
/// batch is being sent.
#[utoipa::path(
    params(SkipQuery),
    tag = "Destination",
    operation_id = "v1.destination.skip",
    request_body(content = Option<SkipIn>, description = "optional: an empty body (and no `iterator`) skips everything logged"),
    responses((status = 204, description = "moved, or already past"))
)]
#[post("/app/{app_id}/destination/{destination_id}/skip")]
async fn skip(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: DestPath,
    q: web::Query<SkipQuery>,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body: SkipIn = optional_json(&body)?;
    let iterator = body.iterator.or_else(|| q.into_inner().iterator).filter(|i| !i.is_empty());
    let msg = match iterator.as_deref() {
        Some(i) if i.starts_with("msg_") => {
            Some(MessageId::parse(i).map_err(|e| ApiError::Validation(format!("`iterator`: {e}")))?)
        }
        _ => None,
    };
    let position = match (iterator.as_deref(), &msg) {
        (Some(i), None) => Some(Position::parse(i).ok_or_else(|| {
            ApiError::Validation("`iterator` must be a message id or a `currentIterator` this server gave out".into())
        })?),
        _ => None,
    };
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    no_position(&ep)?;
    if ep.kind != EndpointKind::FifoEndpoint {
        return Err(ApiError::Validation(
            "only a FIFO endpoint has a position to skip: cancel a queue destination's pending messages with `…/endpoint/{id}/cancel-msgs`".into(),
        ));
    }
    if position.is_some() && ep.fifo_key.is_some() {
        return Err(ApiError::Validation(
            "a keyed FIFO endpoint keeps a position per key: name a message id as the `iterator`".into(),
        ));
    }
    let to = match (&msg, position) {
        (Some(m), _) => SkipTo::Message(m, ep.fifo_key.as_deref()),
        (None, Some(p)) => SkipTo::Position(p),
        (None, None) => SkipTo::All,
    };
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    match ops::fifo_skip(&*tx, &tenant.0, &app, &ep.id, to).await? {
        Skipped::Sending => {
            return Err(ApiError::Conflict("a batch is being sent to this FIFO endpoint now: try again shortly".into()))
        }
        Skipped::TooNew => {
            return Err(ApiError::Conflict(
                "`iterator`: that message was logged moments ago, beside transactions still running: try again shortly"
                    .into(),
            ))
        }
        Skipped::NotWaiting => {
            return Err(ApiError::Validation(
                "`iterator`: that message is not waiting on this FIFO endpoint (never sent to it, or already past)"
                    .into(),
            ))
        }
        Skipped::NoSuchPosition => {
            return Err(ApiError::Validation(format!(
                "`iterator`: `{}` is no position in this FIFO endpoint's log (give a `currentIterator` or message id this server gave out for it)",
                iterator.as_deref().unwrap_or_default().chars().take(48).collect::<String>()
            )))
        }
        Skipped::Moved(_) => {}
    }
    let res = answer_empty(&*tx, &state, key.as_deref(), StatusCode::NO_CONTENT).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// Tries now what waits for a retry: a FIFO endpoint's batch, or a queue
/// destination's deliveries (a disabled destination stays as it is).
#[utoipa::path(tag = "Destination", operation_id = "v1.destination.force-retry", responses((status = 204, description = "what waited for a retry is due now")))]
#[post("/app/{app_id}/destination/{destination_id}/force-retry")]
async fn force_retry(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: DestPath,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    no_position(&ep)?;
    let conn = db::conn(&state.db).await?;
    let n = match ep.kind {
        EndpointKind::FifoEndpoint => ops::fifo_retry_now(&**conn, &tenant.0, &app, &ep.id).await?,
        _ => ops::queue_retry_now(&**conn, &tenant.0, &app, &ep.id).await?,
    };
    let res = answer_empty(&**conn, &state, key.as_deref(), StatusCode::NO_CONTENT).await?;
    if n > 0 {
        state.wake.poke();
    }
    Ok(res)
}
