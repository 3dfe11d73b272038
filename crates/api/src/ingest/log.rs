//! `v1.ingest.log.list`: the requests an ingest source refused, newest first
//! (its newest 100 are kept; written by ingress, see `hookgate_ingress::refusals`).

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, SourceId},
    store::{ingest_sources, page::Page, source_refusals},
    AppState,
};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{KeyAuth, PageQuery};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list);
}

/// One refused request, in Svix's (snake_case) shape.
#[derive(Serialize, ToSchema)]
#[schema(as = IngestLogOut)]
struct LogOut {
    id: String,
    source_id: String,
    status_code: i16,
    /// Why it was refused, as the sender was answered.
    error_text: String,
    /// Its headers, credentials redacted.
    headers: BTreeMap<String, String>,
    /// Its body's first 4 KiB, as text.
    payload: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// The requests the source refused (a bad signature, a malformed body, a quota), newest first.
#[utoipa::path(params(PageQuery), tag = "Ingest Source", operation_id = "v1.ingest.log.list", responses((status = 200, body = Page<LogOut>)))]
#[get("/source/{source_id}/log")]
async fn list(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<SourceId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = q.checked(source_refusals::is_log_id)?;
    let conn = db::conn(&state.db).await?;
    let source = ingest_sources::get(&**conn, &key.0, &path).await?.ok_or(ApiError::NotFound("ingest source"))?;
    let refused = source_refusals::list(&**conn, &key.0, &source.id, &page).await?;
    Ok(HttpResponse::Ok().json(refused.map(|r| LogOut {
        id: r.id,
        source_id: r.source_id.to_string(),
        status_code: r.status_code,
        error_text: r.error_text,
        headers: serde_json::from_value(r.headers).unwrap_or_default(),
        payload: r.payload,
        created_at: r.created_at,
        updated_at: r.created_at,
    })))
}
