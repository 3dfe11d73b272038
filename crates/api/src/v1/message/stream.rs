//! The message streams: `v1.message.events` (an application's messages, for
//! polling it whole) and `v1.events.stream` (the tenant's operational events),
//! read in order and never past a message still to commit (`store::message_stream`).

use actix_web::{get, web, HttpResponse};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    crypto::TenantKey,
    db,
    http::ApiError,
    ids::{AppId, Ref},
    store::{
        message_stream::{self, Horizon, StreamFilter, StreamPosition},
        operational,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::applications::find as find_app;
use crate::v1::message::crud::MessageOut;
use crate::v1::validate;
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(app_events).service(operational_events);
}

const DEFAULT_LIMIT: i64 = 50;
const MOST: i64 = 250;
/// The tenant's messages a page looks at, at most (its index is by tenant and
/// time): past them it answers what it found and an iterator to go on from.
const MOST_SCANNED: i64 = 2000;
/// Event types or channels a read may filter on.
const MOST_FILTERED: usize = 100;

/// Where a read starts (`iterator`, else the first message after `after`, else
/// the oldest kept) and which messages it answers.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct StreamQuery {
    limit: Option<i64>,
    iterator: Option<String>,
    /// Repeated or comma-separated.
    event_types: Option<String>,
    /// Repeated or comma-separated: messages with any of them.
    channels: Option<String>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
}

/// A page of a stream (Svix's `MessageEventsOut`).
#[derive(Serialize, ToSchema)]
struct MessageEventsOut {
    data: Vec<MessageOut>,
    /// Whether the page came to the end of what can be read now.
    done: bool,
    /// Where the next read goes on from.
    iterator: String,
}

impl StreamQuery {
    fn limit(&self) -> Result<usize, ApiError> {
        match self.limit.unwrap_or(DEFAULT_LIMIT) {
            n @ 1..=MOST => Ok(n as usize),
            _ => Err(ApiError::Validation(format!("`limit` must be 1 to {MOST}"))),
        }
    }

    fn from(&self, key: &TenantKey, stream: &str) -> Result<StreamPosition, ApiError> {
        Ok(match (&self.iterator, self.after) {
            (Some(it), _) => opened(key, stream, it)
                .ok_or_else(|| ApiError::Validation("`iterator` is not one this server gave out".into()))?,
            (None, Some(after)) => StreamPosition::after(after),
            (None, None) => StreamPosition::start(),
        })
    }

    fn filter(&self) -> Result<StreamFilter, ApiError> {
        let list = |s: &Option<String>| -> Option<Vec<String>> {
            s.as_ref().map(|s| s.split(',').filter(|v| !v.is_empty()).map(str::to_owned).collect())
        };
        let (event_types, channels) = (list(&self.event_types), list(&self.channels));
        for (field, values) in [("event_types", &event_types), ("channels", &channels)] {
            let values = values.as_deref().unwrap_or_default();
            if values.len() > MOST_FILTERED {
                return Err(ApiError::Validation(format!("`{field}` may name at most {MOST_FILTERED}")));
            }
            values.iter().try_for_each(|v| validate::name(field, v))?;
        }
        Ok(StreamFilter { event_types, channels })
    }
}

/// The iterator given out: the position sealed with the tenant's key, bound to
/// the application. A page may end on another application's message (one it
/// looked at and passed over); sealed, its id and time are not shown.
fn sealed(key: &TenantKey, stream: &str, at: &StreamPosition) -> String {
    URL_SAFE_NO_PAD.encode(key.seal(&format!("message-stream:{stream}"), at.iterator().as_bytes()))
}

/// An iterator read back; `None` if it is not one given out for this stream.
fn opened(key: &TenantKey, stream: &str, iterator: &str) -> Option<StreamPosition> {
    if iterator.len() > 512 {
        return None;
    }
    let raw = URL_SAFE_NO_PAD.decode(iterator.as_bytes()).ok()?;
    let plain = key.open(&format!("message-stream:{stream}"), &raw).ok()?;
    StreamPosition::parse(std::str::from_utf8(&plain).ok()?)
}

/// Reads one page of `stream` (the name its iterators are sealed for): the
/// horizon first (its own statement), then the messages below it. Without an
/// application (a tenant with no operational events kept), an empty page.
async fn page(
    state: &AppState,
    tenant: &TenantAuth,
    stream: &str,
    app: Option<&AppId>,
    q: &StreamQuery,
) -> Result<MessageEventsOut, ApiError> {
    let key = state.config.master_key.tenant_key(&tenant.0);
    let (limit, filter, from) = (q.limit()?, q.filter()?, q.from(&key, stream)?);
    let nothing =
        |from: StreamPosition| MessageEventsOut { data: Vec::new(), done: true, iterator: sealed(&key, stream, &from) };
    let Some(app) = app else { return Ok(nothing(from)) };
    let conn = db::conn(&state.db).await?;
    let below = match message_stream::horizon(&**conn).await? {
        Horizon::Below(t) => t,
        // Documented in docs/api-surface.md: nothing new until that session's transaction ends.
        Horizon::Unseen => return Ok(nothing(from)),
        Horizon::Untracked => {
            return Err(ApiError::Coded {
                status: actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                code: "stream_unavailable",
                detail: "message streams need Postgres's `track_activities` on".into(),
            })
        }
    };
    let read = message_stream::read(&**conn, &tenant.0, app, &from, below, &filter, limit, MOST_SCANNED).await?;
    Ok(MessageEventsOut {
        data: read.found.into_iter().map(|m| MessageOut::new(m, true)).collect(),
        done: read.done,
        iterator: sealed(&key, stream, &read.next),
    })
}

/// Reads the application's messages in the order they were created, from
/// `iterator` (or `after`, or the oldest kept), never passing one still to commit.
#[utoipa::path(params(StreamQuery), tag = "Message", operation_id = "v1.message.events", responses((status = 200, body = MessageEventsOut)))]
#[get("/app/{app_id}/events")]
async fn app_events(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<StreamQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path).await?;
    let stream = format!("app:{}", app.id);
    Ok(HttpResponse::Ok().json(page(&state, &tenant, &stream, Some(&app.id), &q).await?))
}

/// Reads the tenant's operational events (the messages of its operational
/// webhooks' application) as a stream. Only events an operational webhook
/// endpoint subscribes to are kept, so only those are read.
#[utoipa::path(params(StreamQuery), tag = "Events", operation_id = "v1.events.stream", responses((status = 200, body = MessageEventsOut)))]
#[get("/events")]
async fn operational_events(
    key: KeyAuth,
    state: web::Data<AppState>,
    q: web::Query<StreamQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = TenantAuth(key.0);
    let app = {
        let conn = db::conn(&state.db).await?;
        operational::app(&**conn, &tenant.0).await?
    };
    Ok(HttpResponse::Ok().json(page(&state, &tenant, "operational", app.as_ref(), &q).await?))
}
