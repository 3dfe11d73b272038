//! Hookgate's own tenant routes for the web UI: the cross-direction search and
//! the portal's branding. Both need the tenant's API key, never a portal token.

use crate::KeyAuth;
use actix_web::{get, put, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    store::{attempts, delivery_views, page::PageRequest, portals, search},
    AppState,
};
use serde::Deserialize;
use serde_json::json;

use super::{
    attempts::AttemptOut, endpoints::EndpointOut, inbound_events::out as inbound_out, messages::MessageOut,
    portal_settings,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(find).service(get_portal).service(put_portal);
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
}

/// Most deliveries and attempts shown per message found.
const PER_MESSAGE: i64 = 50;

/// `GET /api/v1/search?q=`: a message id, an inbound event id, an eventId, an
/// `Idempotency-Key` or a provider's event id, followed both ways: inbound event
/// → message → its deliveries → their attempts.
#[get("/search")]
async fn find(key: KeyAuth, state: web::Data<AppState>, q: web::Query<SearchQuery>) -> Result<HttpResponse, ApiError> {
    if q.q.len() > 256 {
        return Err(ApiError::Validation("`q` must be at most 256 characters".into()));
    }
    let conn = db::conn(&state.db).await?;
    let found = search::find(&**conn, &key.0, &q.q).await?;
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
        let deliveries: Vec<_> = dests
            .data
            .into_iter()
            .map(|(ep, d)| {
                json!({
                    "endpoint": EndpointOut::from(ep),
                    "status": d.status,
                    "statusText": d.status.text(),
                    "nextAttempt": d.next_attempt_at,
                })
            })
            .collect();
        let attempts: Vec<AttemptOut> = tried.data.into_iter().map(AttemptOut::from).collect();
        messages.push(json!({
            "appId": m.app_id.to_string(),
            "message": MessageOut::new(m.message, true),
            "deliveries": deliveries,
            "attempts": attempts,
        }));
    }
    let inbound: Vec<_> = found
        .inbound
        .into_iter()
        .map(|f| json!({ "sourceId": f.source_id.to_string(), "event": inbound_out(f.event, true) }))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "query": q.q.trim(), "inbound": inbound, "messages": messages })))
}

#[get("/settings/portal")]
async fn get_portal(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(HttpResponse::Ok().json(portals::get(&**conn, &key.0).await?))
}

/// Replaces the portal's branding and framing origins; every field is checked
/// here (a colour, an image URL, origins), since each ends up in a page or a
/// `Content-Security-Policy` header.
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
