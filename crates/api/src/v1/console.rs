//! Hookgate's own tenant routes for the web UI: the cross-direction search and
//! the portal's branding. Both need the tenant's API key, never a portal token.

use crate::KeyAuth;
use actix_web::{get, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_ingress::key::{self, KeyKind};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{SourceId, TenantId},
    inbound_keys::{self, DedupeKey},
    status::DeliveryStatus,
    store::{attempts, delivery_views, page::PageRequest, portals, portals::PortalSettings, search, sources},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{
    attempts::AttemptOut,
    endpoint::crud::EndpointOut,
    inbound_events::{out as inbound_out, EventOut},
    message::crud::MessageOut,
    portal_settings,
};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(find).service(get_portal).service(put_portal);
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct SearchQuery {
    /// What to look for (at most 256 characters).
    q: String,
}

/// What a search found, both ways.
#[derive(Serialize, ToSchema)]
struct SearchOut {
    /// The query, trimmed.
    query: String,
    inbound: Vec<SearchInbound>,
    messages: Vec<SearchMessage>,
}

/// An inbound event found, with its source.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SearchInbound {
    source_id: String,
    event: EventOut,
}

/// A message found, with its deliveries and their attempts.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SearchMessage {
    app_id: String,
    message: MessageOut,
    deliveries: Vec<SearchDelivery>,
    attempts: Vec<AttemptOut>,
}

/// A message's delivery to one endpoint.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SearchDelivery {
    endpoint: EndpointOut,
    status: DeliveryStatus,
    /// The status in words: `success`, `pending`, `fail`, `sending` or `canceled`.
    status_text: &'static str,
    next_attempt: Option<DateTime<Utc>>,
}

/// Most deliveries and attempts shown per message found.
const PER_MESSAGE: i64 = 50;

/// `GET /api/v1/search?q=`: a message id, an inbound event id, an eventId, an
/// `Idempotency-Key` or a provider's event id, followed both ways: inbound event
/// → message → its deliveries → their attempts.
#[utoipa::path(params(SearchQuery), tag = "Search", operation_id = "hookgate.search.find", responses((status = 200, body = SearchOut)))]
#[get("/search")]
async fn find(key: KeyAuth, state: web::Data<AppState>, q: web::Query<SearchQuery>) -> Result<HttpResponse, ApiError> {
    if q.q.len() > 256 {
        return Err(ApiError::Validation("`q` must be at most 256 characters".into()));
    }
    let conn = db::conn(&state.db).await?;
    let keys = inbound_keys(&state, &**conn, &key.0, q.q.trim()).await?;
    let found = search::find(&**conn, &key.0, &q.q, &keys).await?;
    let mut messages = Vec::with_capacity(found.messages.len());
    for m in found.messages {
        let page = PageRequest::new(Some(PER_MESSAGE), None);
        let dests = delivery_views::destinations(&**conn, &key.0, &m.app_id, &m.message.id, &page).await?;
        let tried = attempts::list(
            &**conn,
            &key.0,
            &m.app_id,
            attempts::Scope::Message(&m.message.id),
            &page,
            &Default::default(),
        )
        .await?;
        let deliveries = dests
            .data
            .into_iter()
            .map(|(ep, d)| SearchDelivery {
                endpoint: EndpointOut::from(ep),
                status: d.status,
                status_text: d.status.text(),
                next_attempt: d.next_attempt_at,
            })
            .collect();
        let attempts: Vec<AttemptOut> = tried.data.into_iter().map(AttemptOut::from).collect();
        messages.push(SearchMessage {
            app_id: m.app_id.to_string(),
            message: MessageOut::new(m.message, true),
            deliveries,
            attempts,
        });
    }
    // Copies caught by Redis are counted there, as in the source's event list.
    let inbound_keys: Vec<String> = found.inbound.iter().map(|f| f.event.key.clone()).collect();
    let mut extra = hookgate_ingress::admit::stored_duplicates(&state, &key.0, &inbound_keys).await.into_iter();
    let inbound = found
        .inbound
        .into_iter()
        .map(|mut f| {
            f.event.duplicates += extra.next().unwrap_or(0) as i32;
            SearchInbound { source_id: f.source_id.to_string(), event: inbound_out(f.event, true) }
        })
        .collect();
    Ok(HttpResponse::Ok().json(SearchOut { query: q.q.trim().to_owned(), inbound, messages }))
}

/// Most sources whose keys a search derives.
const MAX_SOURCES: usize = 1000;

/// The keys `q` would be stored under in each of the tenant's sources, were it
/// a provider's event id, a header value or a body field (ingress derives every
/// key per source), and `q` itself (a stored key, as a delivery's
/// `Idempotency-Key` shows it), each with its source.
async fn inbound_keys(
    state: &AppState,
    db: &impl tokio_postgres::GenericClient,
    tenant: &TenantId,
    q: &str,
) -> Result<Vec<(SourceId, String)>, ApiError> {
    let mut keys = Vec::new();
    let mut page = PageRequest::new(Some(250), None);
    let mut seen = 0;
    loop {
        let found = sources::list(db, tenant, &page).await?;
        seen += found.data.len();
        for s in &found.data {
            keys.push((s.id.clone(), q.to_owned()));
            for kind in [KeyKind::Provider, KeyKind::Header, KeyKind::JsonPointer] {
                // Stored keyed, or plain by an admission before keys were keyed.
                let derived = inbound_keys::dedupe_key(state, tenant, key::derive(tenant, &s.id, kind, q.as_bytes()));
                let DedupeKey { key, plain } = derived.await?;
                keys.push((s.id.clone(), key));
                keys.extend(plain.map(|p| (s.id.clone(), p)));
            }
        }
        if found.done || seen >= MAX_SOURCES {
            return Ok(keys);
        }
        page = PageRequest::following(250, found.iterator);
    }
}

/// The portal's branding and framing origins (Hookgate's defaults if never set).
#[utoipa::path(tag = "Portal Settings", operation_id = "hookgate.portal-settings.get", responses((status = 200, body = PortalSettings)))]
#[get("/settings/portal")]
async fn get_portal(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(HttpResponse::Ok().json(portals::get(&**conn, &key.0).await?))
}

/// Replaces the portal's branding and framing origins; every field is checked
/// here (a colour, an image URL, origins), since each ends up in a page or a
/// `Content-Security-Policy` header.
#[utoipa::path(tag = "Portal Settings", operation_id = "hookgate.portal-settings.update", responses((status = 200, body = PortalSettings)))]
#[put("/settings/portal")]
async fn put_portal(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<portal_settings::SettingsIn>,
) -> Result<HttpResponse, ApiError> {
    let settings = body.into_inner().parse()?;
    let conn = db::conn(&state.db).await?;
    if !portals::put(&**conn, &key.0, &settings).await? {
        return Err(ApiError::NotFound("tenant"));
    }
    Ok(HttpResponse::Ok().json(settings))
}
