//! The rest of Svix's `message` reads: `get-raw-payload`, an attempt's headers
//! (`v1.message-attempt.get-headers`) and `search` (the list's filters in a body).

use std::collections::{BTreeMap, BTreeSet};

use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::secrets::{OWN_HEADERS, SENSITIVE_HEADERS};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, AttemptId, MessageId, Ref},
    store::{
        messages::{self, MessageFilter},
        page::{Page, PageRequest},
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::applications::find as find_app;
use crate::v1::message::crud::{payload_json, MessageOut};
use crate::v1::validate;
use crate::{PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(raw).service(headers).service(search);
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
        // Only Hookgate's own headers show their values, whatever was recorded:
        // attempts of an earlier release kept custom values in clear.
        let own = OWN_HEADERS.contains(&name.as_str()) && !SENSITIVE_HEADERS.contains(&name.as_str());
        let hidden = value == REDACTED || !own;
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
    let a = crate::v1::attempts::find_attempt(&state, &tenant, &path).await?;
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
            delivery_status: None,
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
    // A list like `GET …/msg`: the replica's while it keeps up.
    let found = state.read(async |c| messages::list(c, &tenant.0, &app.id, &page, &filter).await).await?;
    Ok(HttpResponse::Ok().json(found.map(|m| MessageOut::new(m, body.with_content))))
}
