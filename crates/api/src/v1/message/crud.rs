//! `v1.message.*`: create (the message and its deliveries in one transaction), list, get.

use std::collections::HashMap;

use crate::{idempotency::RequestKey, KeyAuth, PageQuery, TenantAuth};
use actix_web::{delete, get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_egress::publish::{InlineApp, PublishError, Publisher};
use hookgate_shared::store::page::Page;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, MessageId, Ref},
    status::DeliveryStatus,
    store::{
        applications::ApplicationFields,
        erasure,
        messages::{self, Message, MessageFilter, NewMessage},
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::{applications::find as find_app, validate};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create).service(list).service(get_one).service(expunge_content);
}

/// A message to send: its event type, its payload, and how it is filed.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MessageIn {
    event_type: String,
    /// Kept as the exact bytes sent: the body delivered is this, byte for byte.
    #[schema(value_type = Object)]
    payload: Box<RawValue>,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    tags: Option<Vec<String>>,
    application: Option<AppInline>,
    /// Days the payload is kept (5 to 90, as Svix): after it the message reads
    /// `{"expired": true}` and cannot be resent. Absent: as long as the message.
    payload_retention_period: Option<i64>,
    /// The same in hours (1 to 2160), for SDKs that send it; not with the above.
    payload_retention_hours: Option<i64>,
    /// Svix's raw payload (the SDKs' `message_in_raw`): sent instead of `payload`.
    transformations_params: Option<TransformationsParams>,
}

/// A payload sent as it is, not as JSON, and the `Content-Type` it goes with.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TransformationsParams {
    /// The body every endpoint receives, byte for byte (need not be JSON).
    raw_payload: Option<String>,
    /// Only `content-type` is read: the `Content-Type` the body is sent with.
    #[serde(default)]
    headers: HashMap<String, String>,
}

/// The bytes to store and send, and their content type: the raw payload if one
/// was given (with its `content-type`), else the JSON payload.
fn body_of(body: &MessageIn) -> Result<(Vec<u8>, String), ApiError> {
    let json = || (body.payload.get().as_bytes().to_vec(), "application/json".to_owned());
    let Some(params) = &body.transformations_params else { return Ok(json()) };
    let Some(raw) = &params.raw_payload else { return Ok(json()) };
    let mut named = params.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    let content_type = named.next().map_or("application/json", |(_, v)| v.as_str());
    if named.next().is_some() {
        return Err(ApiError::Validation("`transformationsParams.headers` names `content-type` twice".into()));
    }
    if content_type.is_empty() || content_type.len() > 256 || content_type.bytes().any(|b| b.is_ascii_control()) {
        return Err(ApiError::Validation(
            "`transformationsParams.headers.content-type` must be 1 to 256 printable characters".into(),
        ));
    }
    Ok((raw.as_bytes().to_vec(), content_type.to_owned()))
}

/// When the payload is dropped, from `payloadRetentionPeriod` or `payloadRetentionHours`.
fn payload_expiry(days: Option<i64>, hours: Option<i64>) -> Result<Option<DateTime<Utc>>, ApiError> {
    Ok(retention_hours(days, hours, 5)?.map(|h| Utc::now() + chrono::Duration::hours(h)))
}

/// The hours a payload is kept, from `payloadRetentionPeriod` (`least_days` to 90
/// days) or `payloadRetentionHours` (1 to 2160), which exclude each other; `None`
/// when neither is given.
pub(crate) fn retention_hours(days: Option<i64>, hours: Option<i64>, least_days: i64) -> Result<Option<i64>, ApiError> {
    match (days, hours) {
        (Some(_), Some(_)) => Err(ApiError::Validation(
            "`payloadRetentionPeriod` and `payloadRetentionHours` are mutually exclusive".into(),
        )),
        (Some(d), None) if !(least_days..=90).contains(&d) => {
            Err(ApiError::Validation(format!("`payloadRetentionPeriod` must be {least_days} to 90 days")))
        }
        (None, Some(h)) if !(1..=2160).contains(&h) => {
            Err(ApiError::Validation("`payloadRetentionHours` must be 1 to 2160 hours".into()))
        }
        (Some(d), None) => Ok(Some(d * 24)),
        (None, h) => Ok(h),
    }
}

/// The application to create with the message when its path names none.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MessageApplicationIn)]
struct AppInline {
    name: String,
    uid: Option<String>,
    #[serde(alias = "rateLimit")]
    throttle_rate: Option<i64>,
}

/// A message as the API shows it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageOut {
    pub id: String,
    pub event_type: String,
    pub event_id: Option<String>,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    /// The payload; `{}` without content, `{"expired": true}` once erased.
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    pub timestamp: DateTime<Utc>,
}

/// The payload as JSON: itself when it is JSON, else a JSON string of its text
/// (a form-encoded body forwarded by ingress, say).
/// An expired or expunged payload reads `{"expired": true}`, as Svix answers.
pub(crate) fn payload_json(m: &Message, with_content: bool) -> Box<RawValue> {
    if !with_content {
        return RawValue::from_string("{}".into()).expect("valid JSON");
    }
    let Some(payload) = &m.payload else {
        return RawValue::from_string(r#"{"expired":true}"#.into()).expect("valid JSON");
    };
    match std::str::from_utf8(payload).ok().and_then(|s| RawValue::from_string(s.to_owned()).ok()) {
        Some(raw) => raw,
        None => {
            let text = String::from_utf8_lossy(payload);
            RawValue::from_string(serde_json::to_string(&text).expect("a string serialises")).expect("valid JSON")
        }
    }
}

impl MessageOut {
    pub(crate) fn new(m: Message, with_content: bool) -> Self {
        let payload = payload_json(&m, with_content);
        MessageOut {
            id: m.id.to_string(),
            event_type: m.event_type,
            event_id: m.event_id,
            channels: m.channels,
            tags: m.tags,
            payload,
            timestamp: m.created_at,
        }
    }
}

/// `?with_content=`: whether to show payloads (default true).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ContentQuery {
    with_content: Option<bool>,
}

impl ContentQuery {
    pub(crate) fn with_content(&self) -> bool {
        self.with_content.unwrap_or(true)
    }
}

/// `?channel=&before=&after=&event_types=`: which messages to list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct MessageListQuery {
    channel: Option<String>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    before: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
    event_types: Option<String>,
}

impl MessageListQuery {
    /// `event_types` arrives as repeated or comma-separated values.
    pub(crate) fn filter(&self) -> MessageFilter {
        MessageFilter {
            channel: self.channel.clone(),
            event_types: self.event_types.as_ref().map(|s| s.split(',').map(str::to_owned).collect()),
            before: self.before,
            after: self.after,
            tag: None,
            delivery_status: None,
        }
    }
}

/// `?status=`, Hookgate's own on an application's message list: only messages with
/// a delivery in this state.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeliveryStatusQuery {
    /// 0 delivered, 1 or 3 waiting or being sent, 2 failed, 4 canceled.
    status: Option<i16>,
}

impl DeliveryStatusQuery {
    /// The stored codes the state asked for covers.
    fn codes(&self) -> Result<Option<Vec<i16>>, ApiError> {
        Ok(match self.status.map(|c| (c, DeliveryStatus::from_code(c))) {
            None => None,
            Some((_, Some(DeliveryStatus::Pending | DeliveryStatus::Sending))) => {
                Some(vec![DeliveryStatus::Pending.code(), DeliveryStatus::Sending.code()])
            }
            Some((_, Some(s))) => Some(vec![s.code()]),
            Some((c, None)) => {
                return Err(ApiError::Validation(format!("`status`: {c} is not a delivery status (0 to 4)")))
            }
        })
    }
}

fn check(body: &MessageIn) -> Result<(), ApiError> {
    validate::uid("eventType", &body.event_type)?;
    if let Some(id) = &body.event_id {
        validate::uid("eventId", id)?;
    }
    if !body.payload.get().trim_start().starts_with('{') {
        return Err(ApiError::Validation("`payload` must be a JSON object".into()));
    }
    if let Some(ch) = &body.channels {
        validate::channels(ch)?;
    }
    Ok(())
}

/// Creates a message and its deliveries to every endpoint it matches.
#[utoipa::path(params(ContentQuery), tag = "Message", operation_id = "v1.message.create", responses((status = 202, body = MessageOut)))]
#[post("/app/{app_id}/msg")]
async fn create(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    request_key: Option<web::ReqData<RequestKey>>,
    publisher: web::Data<Publisher>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<ContentQuery>,
    body: web::Json<MessageIn>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    check(&body)?;
    let (payload, content_type) = body_of(&body)?;
    // Everything that can refuse the request is checked before the day's place is
    // taken: a refusal must not spend the daily cap.
    let inline = match body.application {
        Some(a) => Some(InlineApp {
            refusal: match path.creatable_uid() {
                None => Some("the path names no application, and an id cannot be created: name it by uid".into()),
                Some(uid) => validate::inline_uid(uid, a.uid.as_deref()).err().map(|e| e.to_string()),
            },
            fields: ApplicationFields {
                uid: a.uid,
                name: a.name,
                throttle_rate: validate::throttle_rate(a.throttle_rate)?,
                metadata: serde_json::json!({}),
            },
            cap: crate::quota::app_cap(&state, &tenant.0).await?,
        }),
        None => None,
    };
    let payload_expires_at = payload_expiry(body.payload_retention_period, body.payload_retention_hours)?;
    let reservation = crate::quota::admit_message(&state, &tenant.0).await?;
    let new = NewMessage {
        id: MessageId::generate(),
        event_id: body.event_id,
        event_type: body.event_type,
        channels: body.channels,
        tags: body.tags,
        payload,
        content_type,
        idempotency_key: None,
        request_key: request_key.map(|k| k.message_key()),
        // Set by the publisher, inside its span.
        traceparent: None,
        payload_expires_at,
    };
    let made = new.id.clone();
    let published = publisher.publish(&tenant.0, &path, new, inline).await;
    // Surely not created by this request: give the day's place back. Not after an
    // error whose outcome is unknown (a timeout may have committed). A message
    // found by the request's Idempotency-Key was counted when it was made.
    let not_created = match &published {
        Err(
            PublishError::Conflict
            | PublishError::SameRequest
            | PublishError::NoApplication
            | PublishError::Invalid(_)
            | PublishError::Busy,
        ) => true,
        Ok(m) => m.id != made,
        Err(_) => false,
    };
    if let (true, Some(r)) = (not_created, reservation) {
        crate::quota::message_not_created(&state, &tenant.0, r).await;
    }
    let message = published.map_err(|e| match e {
        PublishError::Conflict | PublishError::SameRequest => ApiError::Conflict(e.to_string()),
        PublishError::NoApplication => ApiError::NotFound("application"),
        PublishError::Unavailable | PublishError::Busy => ApiError::Unavailable,
        PublishError::Invalid(detail) => ApiError::Validation(detail),
        PublishError::Internal(detail) => ApiError::Internal(detail),
    })?;
    let mut res = HttpResponse::Accepted().json(MessageOut::new(message, q.with_content()));
    // The message stores its request's key: a retry finds it by the key.
    res.extensions_mut().insert(crate::idempotency::CarriesKey);
    Ok(res)
}

/// The application's messages, newest first.
#[utoipa::path(params(PageQuery, MessageListQuery, DeliveryStatusQuery, ContentQuery), tag = "Message", operation_id = "v1.message.list", responses((status = 200, body = Page<MessageOut>)))]
#[get("/app/{app_id}/msg")]
async fn list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    page: web::Query<PageQuery>,
    q: web::Query<MessageListQuery>,
    s: web::Query<DeliveryStatusQuery>,
    c: web::Query<ContentQuery>,
) -> Result<HttpResponse, ApiError> {
    let filter = MessageFilter { delivery_status: s.codes()?, ..q.filter() };
    let app = find_app(&state, &tenant, &path).await?;
    let page = page.page::<MessageId>()?;
    let found = state.read(async |c| messages::list(c, &tenant.0, &app.id, &page, &filter).await).await?;
    Ok(HttpResponse::Ok().json(found.map(|m| MessageOut::new(m, c.with_content()))))
}

/// One message, by id or `eventId`.
#[utoipa::path(params(ContentQuery), tag = "Message", operation_id = "v1.message.get", responses((status = 200, body = MessageOut)))]
#[get("/app/{app_id}/msg/{msg_id}")]
async fn get_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>)>,
    c: web::Query<ContentQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let m = messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    Ok(HttpResponse::Ok().json(MessageOut::new(m, c.with_content())))
}

/// Svix's `v1.message.expunge-content`: the payload is erased from the database
/// (and the inbound event's copy, when ingress created the message); the message
/// reads `{"expired": true}` and can no longer be resent or replayed.
#[utoipa::path(tag = "Message", operation_id = "v1.message.expunge-content", responses((status = 204, description = "the payload was erased")))]
#[delete("/app/{app_id}/msg/{msg_id}/content")]
async fn expunge_content(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>)>,
) -> Result<HttpResponse, ApiError> {
    // The tenant's alone: a customer with a portal token cannot erase content.
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let m = messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    if !erasure::expunge_message(&**conn, &tenant.0, &app.id, &m.id).await? {
        return Err(ApiError::NotFound("message"));
    }
    Ok(HttpResponse::NoContent().finish())
}
