//! `/api/v1/source/{source_id}/event`: what a source admitted, with status and
//! duplicate count, and replay.

use crate::idempotency::{answer, RequestKey};
use crate::{KeyAuth, PageQuery};
use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::deliver::forward::{Event, Forwarder};
use hookgate_shared::store::{page::Page, StoreError};
use hookgate_shared::{
    db,
    http::ApiError,
    store::{deliveries, inbound_events, inbound_events::InboundEvent, sources},
    AppState,
};
use hookgate_shared::{
    ids::{InboundEventId, SourceId},
    status::InboundStatus,
};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(get_one).service(replay);
}

/// An event a source admitted: its key, status, type, message and duplicates.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = InboundEventOut)]
pub(super) struct EventOut {
    id: String,
    key: String,
    status: InboundStatus,
    event_type: String,
    app_id: String,
    msg_id: Option<String>,
    duplicates: i32,
    received_at: DateTime<Utc>,
    /// Shown when one event is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    content_type: Option<String>,
    /// The body: itself when it is JSON, else its text as a JSON string
    /// (`{"expired": true}` once expunged). Shown when one event is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = serde_json::Value)]
    payload: Option<Box<RawValue>>,
}

/// An async event's replay: its message goes again to every endpoint it went to.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ReplayedOut {
    /// How many deliveries were queued again.
    deliveries: u64,
    msg_id: String,
}

/// A sync event's replay: whether the forward succeeded.
#[derive(Serialize, ToSchema)]
struct ForwardedOut {
    forwarded: bool,
}

pub(super) fn out(e: InboundEvent, with_content: bool) -> EventOut {
    let payload = with_content.then(|| match &e.payload {
        // Expunged with its message's content.
        None => RawValue::from_string(r#"{"expired":true}"#.into()).expect("valid JSON"),
        Some(p) => {
            std::str::from_utf8(p).ok().and_then(|s| RawValue::from_string(s.to_owned()).ok()).unwrap_or_else(|| {
                let text = serde_json::to_string(&String::from_utf8_lossy(p)).expect("a string serialises");
                RawValue::from_string(text).expect("valid JSON")
            })
        }
    });
    EventOut {
        id: e.id.to_string(),
        key: e.key,
        status: e.status,
        event_type: e.event_type,
        app_id: e.app_id.to_string(),
        msg_id: e.msg_id.map(|m| m.to_string()),
        duplicates: e.duplicates,
        received_at: e.received_at,
        content_type: with_content.then_some(e.content_type),
        payload,
    }
}

async fn source(state: &AppState, key: &KeyAuth, id: &SourceId) -> Result<sources::Source, ApiError> {
    let conn = db::conn(&state.db).await?;
    sources::get(&**conn, &key.0, id).await?.ok_or(ApiError::NotFound("source"))
}

/// Lists what the source admitted, newest first.
#[utoipa::path(params(PageQuery), tag = "Source", operation_id = "hookgate.inbound-event.list", responses((status = 200, body = Page<EventOut>)))]
#[get("/source/{source_id}/event")]
async fn list(
    key: KeyAuth,
    state: web::Data<AppState>,
    id: web::Path<SourceId>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let s = source(&state, &key, &id).await?;
    let conn = db::conn(&state.db).await?;
    let page = inbound_events::list(&**conn, &key.0, &s.id, &q.page::<InboundEventId>()?).await?;
    let keys: Vec<String> = page.data.iter().map(|e| e.key.clone()).collect();
    let mut extra = hookgate_ingress::admit::stored_duplicates(&state, &key.0, &keys).await.into_iter();
    Ok(HttpResponse::Ok().json(page.map(|mut e| {
        e.duplicates += extra.next().unwrap_or(0) as i32;
        out(e, false)
    })))
}

/// Gets one inbound event, with its content.
#[utoipa::path(tag = "Source", operation_id = "hookgate.inbound-event.get", responses((status = 200, body = EventOut)))]
#[get("/source/{source_id}/event/{event_id}")]
async fn get_one(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(SourceId, InboundEventId)>,
) -> Result<HttpResponse, ApiError> {
    let s = source(&state, &key, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let mut e =
        inbound_events::get(&**conn, &key.0, &s.id, &path.1).await?.ok_or(ApiError::NotFound("inbound event"))?;
    e.duplicates +=
        hookgate_ingress::admit::stored_duplicates(&state, &key.0, std::slice::from_ref(&e.key)).await[0] as i32;
    Ok(HttpResponse::Ok().json(out(e, true)))
}

/// Async events: their message goes again to every endpoint it went to, with the
/// same `webhook-id`. Sync events: forwarded again now.
#[utoipa::path(tag = "Source", operation_id = "hookgate.inbound-event.replay", responses((status = 202, description = "async: its message goes out again", body = ReplayedOut), (status = 200, description = "sync: forwarded again", body = ForwardedOut)))]
#[post("/source/{source_id}/event/{event_id}/replay")]
async fn replay(
    key: KeyAuth,
    state: web::Data<AppState>,
    forwarder: web::Data<Forwarder>,
    path: web::Path<(SourceId, InboundEventId)>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let s = source(&state, &key, &path.0).await?;
    let mut conn = db::conn(&state.db).await?;
    let e = inbound_events::get(&**conn, &key.0, &s.id, &path.1).await?.ok_or(ApiError::NotFound("inbound event"))?;
    if e.payload.is_none() {
        return Err(ApiError::Conflict("the event's content was expunged: it cannot be replayed".into()));
    }
    if let Some(msg) = &e.msg_id {
        let tx = conn.transaction().await.map_err(StoreError::from)?;
        let n = deliveries::replay_message(&*tx, &key.0, &e.app_id, msg).await?;
        let body = ReplayedOut { msg_id: msg.to_string(), deliveries: n };
        let res = answer(&*tx, &state, request.as_deref(), StatusCode::ACCEPTED, &body).await?;
        tx.commit().await.map_err(StoreError::from)?;
        state.wake.poke();
        return Ok(res);
    }
    // Sync mode: the effect is the forward itself, which no transaction holds; a
    // retry whose first run's outcome was lost forwards again (at least once).
    drop(conn);
    let Some(payload) = &e.payload else { return Err(ApiError::NotFound("inbound event")) };
    let webhook_id = hookgate_ingress::admit::sync_webhook_id(&e.key);
    let ok = forwarder
        .forward(&Event {
            tenant: &key.0,
            app: &e.app_id,
            webhook_id: &webhook_id,
            event_type: &e.event_type,
            content_type: &e.content_type,
            idempotency_key: &e.key,
            payload,
        })
        .await?;
    Ok(HttpResponse::Ok().json(ForwardedOut { forwarded: ok }))
}
