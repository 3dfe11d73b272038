//! The rest of Svix's `message` reads: `get-raw-payload`, an attempt's headers
//! (`v1.message-attempt.get-headers`), `search` (the list's filters in a body),
//! and the polling streams `v1.events.stream` and `v1.message.events`.

use std::collections::{BTreeMap, BTreeSet};

use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::secrets::SENSITIVE_HEADERS;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{self, AppId, AttemptId, MessageId, Ref},
    store::{
        attempts,
        message_events::{self, EventsWindow},
        messages::{self, MessageFilter},
        page::{Page, PageRequest},
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::applications::find as find_app;
use super::messages::{payload_json, MessageOut};
use super::validate;
use crate::{PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(raw).service(headers).service(search).service(tenant_events).service(app_events);
}

/// A message's payload as the string it was sent as.
#[derive(Serialize, ToSchema)]
struct MessageRawPayloadOut {
    payload: String,
}

/// The payload as stored, byte for byte, as a string (a body that is not UTF-8
/// reads with U+FFFD where its bad bytes are). An expired or expunged payload
/// reads `{"expired":true}`, as `GET …/msg/{id}` shows it.
#[utoipa::path(tag = "Message", operation_id = "v1.message.get-raw-payload", responses((status = 200, body = MessageRawPayloadOut)))]
#[get("/app/{app_id}/msg/{msg_id}/raw")]
async fn raw(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>)>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let m = messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    let payload = match &m.payload {
        Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        None => payload_json(&m, true).get().to_owned(),
    };
    Ok(HttpResponse::Ok().json(MessageRawPayloadOut { payload }))
}

/// The headers an attempt's request went with.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MessageAttemptHeadersOut {
    /// Every header sent; a sensitive one's value reads `[redacted]`.
    sent_headers: BTreeMap<String, String>,
    /// Not kept by Hookgate: always null.
    #[schema(value_type = Option<Vec<Vec<String>>>)]
    response_headers: Option<Vec<[String; 2]>>,
    /// The names of the headers whose values are not shown.
    sensitive: BTreeSet<String>,
}

/// What an attempt recorded it sent, its credentials masked: Hookgate's own
/// headers with their values; every custom header, and any named in
/// `SENSITIVE_HEADERS`, by name only (`[redacted]`, and listed in `sensitive`).
fn masked(recorded: Option<&serde_json::Value>) -> MessageAttemptHeadersOut {
    const REDACTED: &str = "[redacted]";
    let mut sent_headers = BTreeMap::new();
    let mut sensitive = BTreeSet::new();
    for (name, value) in recorded.and_then(|v| v.as_object()).into_iter().flatten() {
        let name = name.to_ascii_lowercase();
        let value = value.as_str().unwrap_or(REDACTED);
        let hidden = value == REDACTED || SENSITIVE_HEADERS.contains(&name.as_str());
        if hidden {
            sensitive.insert(name.clone());
        }
        sent_headers.insert(name, if hidden { REDACTED.to_owned() } else { value.to_owned() });
    }
    MessageAttemptHeadersOut { sent_headers, response_headers: None, sensitive }
}

/// The headers the attempt's request went with, as recorded when it was sent
/// (an attempt made before headers were kept has none). Response headers are
/// not kept: `responseHeaders` is null.
#[utoipa::path(tag = "Message Attempt", operation_id = "v1.message-attempt.get-headers", responses((status = 200, body = MessageAttemptHeadersOut)))]
#[get("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/headers")]
async fn headers(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>, AttemptId)>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let m = messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    let a = attempts::get(&**conn, &tenant.0, &app.id, &m.id, &path.2).await?.ok_or(ApiError::NotFound("attempt"))?;
    Ok(HttpResponse::Ok().json(masked(a.request_headers.as_ref())))
}

/// Svix's `MessageSearchIn`: the message list's query in a body. Unknown fields
/// are refused, naming them, so a misspelt filter never widens the answer.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
struct MessageSearchIn {
    limit: Option<i64>,
    /// An `iterator` or `prevIterator` of an earlier page.
    iterator: Option<String>,
    channel: Option<String>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    before: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
    /// Payloads are shown only when `true` (Svix's default here is `false`).
    #[serde(default)]
    with_content: bool,
    tag: Option<String>,
    event_types: Option<Vec<String>>,
}

impl MessageSearchIn {
    fn checked(&self) -> Result<(PageRequest, MessageFilter), ApiError> {
        if let Some(l) = self.limit.filter(|l| !(1..=250).contains(l)) {
            return Err(ApiError::Validation(format!("`limit`: {l} is not 1 to 250")));
        }
        let page = PageQuery { limit: self.limit, iterator: self.iterator.clone(), order: None }.page::<MessageId>()?;
        if let Some(c) = &self.channel {
            validate::uid("channel", c)?;
        }
        if let Some(t) = self.tag.as_ref().filter(|t| t.is_empty() || t.len() > 128) {
            return Err(ApiError::Validation(format!("`tag`: {} characters, not 1 to 128", t.len())));
        }
        if let Some(types) = &self.event_types {
            if types.len() > 250 {
                return Err(ApiError::Validation("`event_types`: at most 250 names".into()));
            }
            types.iter().try_for_each(|t| validate::uid("event_types", t))?;
        }
        let filter = MessageFilter {
            channel: self.channel.clone(),
            event_types: self.event_types.clone(),
            before: self.before,
            after: self.after,
            tag: self.tag.clone(),
        };
        Ok((page, filter))
    }
}

/// The application's messages the body's filters match, newest first, paged
/// as `GET …/msg` is; payloads only with `with_content: true`.
#[utoipa::path(tag = "Message", operation_id = "v1.message.search", request_body = MessageSearchIn, responses((status = 200, body = Page<MessageOut>)))]
#[post("/app/{app_id}/msg/search")]
async fn search(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: MessageSearchIn = crate::optional_json(&body)?;
    let (page, filter) = body.checked()?;
    let app = find_app(&state, &tenant, &path).await?;
    let conn = db::conn(&state.db).await?;
    let found = messages::list(&**conn, &tenant.0, &app.id, &page, &filter).await?;
    Ok(HttpResponse::Ok().json(found.map(|m| MessageOut::new(m, body.with_content))))
}

/// `?limit=&iterator=&event_types=&channels=&after=` of the polling streams.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EventsQuery {
    limit: Option<i64>,
    /// The `iterator` of the previous page (a message id).
    iterator: Option<String>,
    /// Comma-separated event type names.
    event_types: Option<String>,
    /// Comma-separated channels: a message in any of them.
    channels: Option<String>,
    /// Where to start without an iterator (absent: from the first message).
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
}

/// A page of a polling stream.
#[derive(Serialize, ToSchema)]
struct MessageEventsOut {
    data: Vec<MessageOut>,
    /// Where the next poll starts: always set, also when `data` is empty.
    iterator: String,
    /// Nothing more is there to read now.
    done: bool,
}

/// How close to now a page reads: a message's id is made a moment before it
/// commits, so one younger than this may yet appear below an iterator handed out.
const SETTLE: chrono::Duration = chrono::Duration::seconds(2);
/// How much time one page scans at most: a poller far behind pages through the
/// past in windows of this, never the whole history in one statement.
const WINDOW: chrono::Duration = chrono::Duration::hours(1);

fn list_of(field: &str, s: &Option<String>, check: impl Fn(&str) -> bool) -> Result<Option<Vec<String>>, ApiError> {
    let Some(s) = s else { return Ok(None) };
    let items: Vec<String> = s.split(',').filter(|x| !x.is_empty()).map(str::to_owned).collect();
    if items.len() > 250 {
        return Err(ApiError::Validation(format!("`{field}`: at most 250 values")));
    }
    match items.iter().find(|x| !check(x)) {
        Some(bad) => Err(ApiError::Validation(format!(
            "`{field}`: `{}` is not a valid value",
            bad.chars().take(64).collect::<String>()
        ))),
        None => Ok(Some(items)),
    }
}

/// One page of the stream: messages after the iterator (or `after`), oldest first.
async fn events(
    state: &AppState,
    tenant: &TenantAuth,
    app: Option<&AppId>,
    q: &EventsQuery,
) -> Result<HttpResponse, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=250).contains(&limit) {
        return Err(ApiError::Validation(format!("`limit`: {limit} is not 1 to 250")));
    }
    let event_types = list_of("event_types", &q.event_types, ids::is_uid)?;
    let channels = list_of("channels", &q.channels, ids::is_uid)?;
    let start = match (&q.iterator, q.after) {
        (Some(it), _) => MessageId::parse(it)
            .map_err(|_| ApiError::Validation("`iterator`: not an iterator of this stream".into()))?
            .to_string(),
        (None, Some(after)) => ids::floor(MessageId::PREFIX, after),
        (None, None) => ids::floor(MessageId::PREFIX, DateTime::UNIX_EPOCH),
    };
    let horizon = Utc::now() - SETTLE;
    let horizon_id = ids::floor(MessageId::PREFIX, horizon);
    let conn = db::conn(&state.db).await?;
    // The window starts at the first message after the iterator, so a poller far
    // behind skips an empty past at once, and spans an hour at most.
    let since = ids::made_at(&start).unwrap_or(DateTime::UNIX_EPOCH);
    let first = message_events::first_after(&**conn, &tenant.0, app, (&start, since), &horizon_id).await?;
    let Some(from) = first.as_deref().and_then(ids::made_at) else {
        let iterator = horizon_id.max(start);
        return Ok(HttpResponse::Ok().json(MessageEventsOut { data: Vec::new(), iterator, done: true }));
    };
    let until = (from + WINDOW).min(horizon);
    let until_id = ids::floor(MessageId::PREFIX, until);
    let window = EventsWindow {
        app,
        after_id: &start,
        before_id: &until_id,
        event_types: event_types.as_deref(),
        channels: channels.as_deref(),
        limit,
        since,
    };
    let mut found = message_events::events(&**conn, &tenant.0, &window).await?;
    let full = found.len() as i64 > limit;
    found.truncate(limit as usize);
    // A full page goes on after its last message; one that is not, after its window.
    let iterator = match found.last() {
        Some(m) if full => m.id.to_string(),
        _ => until_id.max(start),
    };
    let done = !full && until == horizon;
    let data = found.into_iter().map(|m| MessageOut::new(m, true)).collect();
    Ok(HttpResponse::Ok().json(MessageEventsOut { data, iterator, done }))
}

/// The tenant's messages of every application after the iterator, oldest
/// first, for polling (Svix's `v1.events.stream`).
#[utoipa::path(params(EventsQuery), tag = "Events", operation_id = "v1.events.stream", responses((status = 200, body = MessageEventsOut)))]
#[get("/events")]
async fn tenant_events(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    q: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    events(&state, &tenant, None, &q).await
}

/// The application's messages after the iterator, oldest first, for polling.
#[utoipa::path(params(EventsQuery), tag = "Message", operation_id = "v1.message.events", responses((status = 200, body = MessageEventsOut)))]
#[get("/app/{app_id}/events")]
async fn app_events(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path).await?;
    events(&state, &tenant, Some(&app.id), &q).await
}

#[cfg(test)]
mod tests {
    use super::masked;
    use serde_json::json;

    #[test]
    fn a_credential_header_is_masked_and_named_sensitive() {
        let out = masked(Some(&json!({"Authorization": "Bearer x", "webhook-id": "msg_1", "x-token": "[redacted]"})));
        assert_eq!(out.sent_headers["authorization"], "[redacted]");
        assert_eq!(out.sent_headers["webhook-id"], "msg_1");
        assert_eq!(out.sensitive.iter().map(String::as_str).collect::<Vec<_>>(), ["authorization", "x-token"]);
        assert!(masked(None).sent_headers.is_empty());
    }
}
