//! `v1.message.poller.*`: a polling endpoint's messages read in order by the
//! customer (`poll`), or by named consumers whose position the server keeps
//! (`consumer_poll`, moved back or forth by `consumer_seek`).

use actix_web::{get, post, web, HttpResponse};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    status::EndpointKind,
    store::{
        sinks::{self, Logged, Position},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::v1::{endpoint::crud::find_any, validate};
use crate::TenantAuth;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(poll).service(consumer_poll).service(consumer_seek);
}

const DEFAULT_LIMIT: i64 = 50;
const MOST: i64 = 250;
/// Log rows a filtered poll looks at, at least: past them it answers what it found
/// and an iterator to go on from.
const MOST_SCANNED: i64 = 1000;

/// Where a poll starts (`iterator`, else the first message after `after`, else
/// the start) and which messages it answers.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    limit: Option<i64>,
    iterator: Option<String>,
    #[serde(alias = "eventType")]
    event_type: Option<String>,
    channel: Option<String>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
}

/// How many messages a consumer's poll reads, and from where if not its position.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ConsumerQuery {
    limit: Option<i64>,
    iterator: Option<String>,
}

/// Where a consumer goes: just before the first message logged after `after`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PollingEndpointConsumerSeekIn)]
struct SeekIn {
    #[serde(deserialize_with = "crate::when::at")]
    after: DateTime<Utc>,
}

/// Svix's `PollingEndpointMessageOut`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PollingEndpointMessageOut)]
pub(super) struct PolledOut {
    pub(super) id: String,
    pub(super) event_type: String,
    pub(super) event_id: Option<String>,
    pub(super) channels: Option<Vec<String>>,
    pub(super) tags: Option<Vec<String>>,
    /// Always an object: see `polled`.
    #[schema(value_type = Object)]
    pub(super) payload: Value,
    pub(super) timestamp: DateTime<Utc>,
    /// `content-type` of a payload read as `rawPayload`.
    #[schema(value_type = Option<HashMap<String, String>>)]
    pub(super) headers: Option<Value>,
    pub(super) deliver_at: Option<DateTime<Utc>>,
}

/// A page of a polling endpoint's messages (Svix's `PollingEndpointOut`).
#[derive(Serialize, ToSchema)]
struct PollingEndpointOut {
    data: Vec<PolledOut>,
    /// Whether the page came to the end of what there is now.
    done: bool,
    /// Where the next poll goes on from.
    iterator: String,
}

/// Where a consumer was moved to (Svix's `PollingEndpointConsumerSeekOut`).
#[derive(Serialize, ToSchema)]
struct PollingEndpointConsumerSeekOut {
    iterator: String,
}

/// A message as polled. `payload` is always a JSON object, as Svix's
/// `PollingEndpointMessageOut` says (the SDKs refuse anything else): a payload
/// that is not one (a form, text, a JSON array or string, as providers send
/// through ingress) reads as `{"rawPayload": "<the body as text>"}`, Svix's own
/// name for a payload sent as is, with its `content-type` in `headers`; a body
/// that is not UTF-8 as `{"rawPayloadBase64": "…"}`. One expired or expunged
/// reads as `{}`. Documented in docs/destinations.md.
pub(super) fn polled(l: Logged) -> PolledOut {
    let (payload, headers) = match &l.payload {
        None => (Value::Object(Default::default()), None),
        Some(p) => match serde_json::from_slice::<Value>(p) {
            Ok(object @ Value::Object(_)) => (object, None),
            _ => {
                let raw = match std::str::from_utf8(p) {
                    Ok(text) => json!({ "rawPayload": text }),
                    Err(_) => json!({ "rawPayloadBase64": base64::engine::general_purpose::STANDARD.encode(p) }),
                };
                (raw, Some(json!({ "content-type": l.content_type })))
            }
        },
    };
    PolledOut {
        id: l.msg_id.to_string(),
        event_type: l.event_type,
        event_id: l.event_id,
        channels: l.channels,
        tags: l.tags,
        payload,
        timestamp: l.created_at,
        headers,
        deliver_at: None,
    }
}

/// The application and the polling endpoint the path names; 404 for anything else.
/// With whether it is enabled: a disabled one reads nothing until it is enabled
/// again, then reads on from where it was (what was logged meanwhile included).
pub(super) async fn sink(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    sink: &Ref<EndpointId>,
) -> Result<(AppId, EndpointId, bool), ApiError> {
    match find_any(state, tenant, app, sink).await {
        Ok((app, ep)) if ep.kind == EndpointKind::PollingEndpoint => Ok((app, ep.id, !ep.disabled)),
        Ok(_) | Err(ApiError::NotFound("endpoint")) => Err(ApiError::NotFound("polling endpoint")),
        Err(e) => Err(e),
    }
}

fn limit(l: Option<i64>) -> Result<i64, ApiError> {
    match l.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MOST => Ok(n),
        _ => Err(ApiError::Validation(format!("`limit` must be 1 to {MOST}"))),
    }
}

fn iterator(raw: &str) -> Result<Position, ApiError> {
    Position::parse(raw).ok_or_else(|| ApiError::Validation("`iterator` is not one this server gave out".into()))
}

/// The page's answer: its messages, the iterator to go on from, and whether it
/// came to the end of what there is now.
fn page(rows: Vec<Logged>, from: Position, limit: i64) -> (PollingEndpointOut, Position) {
    let done = (rows.len() as i64) < limit;
    let next = rows.last().map_or(from, |l| l.at);
    let data: Vec<PolledOut> = rows.into_iter().map(polled).collect();
    (PollingEndpointOut { data, done, iterator: next.iterator() }, next)
}

/// Reads a polling endpoint's messages in order, from `iterator` (or `after`, or the start).
#[utoipa::path(params(PollQuery), tag = "Poller", operation_id = "hookgate.poller.poll", responses((status = 200, body = PollingEndpointOut)))]
#[get("/app/{app_id}/poller/{sink_id}")]
async fn poll(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    q: web::Query<PollQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = limit(q.limit)?;
    let (app, sink, enabled) = sink(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    let from = match (&q.iterator, q.after) {
        (Some(it), _) => iterator(it)?,
        (None, Some(after)) => sinks::position_at(&**conn, &tenant.0, &app, &sink, after).await?,
        (None, None) => Position::ZERO,
    };
    if !enabled {
        return Ok(HttpResponse::Ok().json(nothing(from)));
    }
    let read = sinks::read_filtered(
        &**conn,
        &tenant.0,
        &app,
        &sink,
        from,
        limit,
        // Without a filter every row is a match: look at no more than asked.
        if q.event_type.is_none() && q.channel.is_none() { limit } else { (limit * 20).max(MOST_SCANNED) },
        q.event_type.as_deref(),
        q.channel.as_deref(),
    )
    .await?;
    let data: Vec<PolledOut> = read.found.into_iter().map(polled).collect();
    Ok(HttpResponse::Ok().json(PollingEndpointOut { data, done: read.done, iterator: read.next.iterator() }))
}

/// Reads on from the consumer's position (or from `iterator` when given), and
/// keeps where this read ended as its position.
#[utoipa::path(params(ConsumerQuery), tag = "Poller", operation_id = "hookgate.poller.consumer-poll", responses((status = 200, body = PollingEndpointOut)))]
#[get("/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}")]
async fn consumer_poll(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>, String)>,
    q: web::Query<ConsumerQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = limit(q.limit)?;
    validate::uid("consumer", &path.2)?;
    let (app, sink, enabled) = sink(&state, &tenant, &path.0, &path.1).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let kept = sinks::consumer(&*tx, &tenant.0, &app, &sink, &path.2).await?;
    let from = match &q.iterator {
        Some(it) => iterator(it)?,
        None => kept.unwrap_or(Position::ZERO),
    };
    if !enabled {
        // Reads nothing, and the consumer stays where it was.
        return Ok(HttpResponse::Ok().json(nothing(from)));
    }
    let rows = sinks::read(&*tx, &tenant.0, &app, &sink, "", from, limit, None, None).await?;
    let (body, next) = page(rows, from, limit);
    // The answer is made before the new position is kept: a position is saved
    // only with an answer the client can read (each payload an object, `polled`).
    let body = serde_json::to_vec(&body).map_err(|e| ApiError::Internal(format!("a page did not serialise: {e}")))?;
    sinks::set_consumer(&*tx, &tenant.0, &app, &sink, &path.2, next).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().content_type("application/json").body(body))
}

/// The page of a disabled polling endpoint: nothing, and the same iterator.
fn nothing(from: Position) -> PollingEndpointOut {
    PollingEndpointOut { data: Vec::new(), done: true, iterator: from.iterator() }
}

/// Moves the consumer to just before the first message logged after `after`.
#[utoipa::path(tag = "Poller", operation_id = "hookgate.poller.consumer-seek", responses((status = 200, body = PollingEndpointConsumerSeekOut)))]
#[post("/app/{app_id}/poller/{sink_id}/consumer/{consumer_id}/seek")]
async fn consumer_seek(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>, String)>,
    body: web::Json<SeekIn>,
) -> Result<HttpResponse, ApiError> {
    validate::uid("consumer", &path.2)?;
    let (app, sink, _) = sink(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    let at = sinks::position_at(&**conn, &tenant.0, &app, &sink, body.after).await?;
    sinks::set_consumer(&**conn, &tenant.0, &app, &sink, &path.2, at).await?;
    Ok(HttpResponse::Ok().json(PollingEndpointConsumerSeekOut { iterator: at.iterator() }))
}
