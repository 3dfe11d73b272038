//! `v1.message-attempt.*`: list by endpoint and by message, get, attempted
//! destinations, attempted messages, resend.

use crate::idempotency::{answer, RequestKey};
use crate::{KeyAuth, PageQuery, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{delete, get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::ids::{AppId, AttemptId, EndpointId, MessageId, Ref};
use hookgate_shared::status::{DeliveryStatus, Trigger};
use hookgate_shared::store::page::Page;
use hookgate_shared::store::{erasure, StoreError};
use hookgate_shared::{
    db,
    http::ApiError,
    store::{
        attempts::{self, Attempt, AttemptFilter, Scope},
        deliveries, delivery_views, messages,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{
    applications::find as find_app,
    endpoint::crud::{self, EndpointOut},
    message::crud::{ContentQuery, MessageListQuery, MessageOut},
};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(by_endpoint)
        .service(count_by_endpoint)
        .service(by_msg)
        .service(get_one)
        .service(destinations)
        .service(attempted_messages)
        .service(resend)
        .service(expunge_content);
}

/// One attempt to deliver a message to an endpoint.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MessageAttemptOut)]
pub(super) struct AttemptOut {
    id: String,
    msg_id: String,
    endpoint_id: String,
    url: String,
    response: String,
    response_status_code: i16,
    response_duration_ms: i64,
    status: DeliveryStatus,
    /// The status in words: `success`, `pending`, `fail`, `sending` or `canceled`.
    #[schema(example = "success")]
    status_text: &'static str,
    trigger_type: Trigger,
    timestamp: DateTime<Utc>,
    /// Hookgate's own: the headers the request went with (sensitive custom
    /// header values redacted); absent for attempts made before they were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<HashMap<String, String>>)]
    request_headers: Option<serde_json::Value>,
}

impl From<Attempt> for AttemptOut {
    fn from(a: Attempt) -> Self {
        AttemptOut {
            id: a.id.to_string(),
            msg_id: a.msg_id.to_string(),
            endpoint_id: a.endpoint_id.to_string(),
            url: a.url,
            response: a.response,
            response_status_code: a.response_status_code,
            response_duration_ms: a.response_duration_ms,
            status: a.status,
            status_text: a.status.text(),
            trigger_type: a.trigger_type,
            timestamp: a.created_at,
            request_headers: a.request_headers.map(hookgate_egress::secrets::shown_headers),
        }
    }
}

/// `?status=&status_code_class=&endpoint_id=&channel=&tag=&event_types=&before=&after=`:
/// which attempts to list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AttemptQuery {
    status: Option<i16>,
    status_code_class: Option<i16>,
    endpoint_id: Option<String>,
    channel: Option<String>,
    tag: Option<String>,
    /// Comma-separated.
    event_types: Option<String>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    before: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    after: Option<DateTime<Utc>>,
}

impl AttemptQuery {
    fn filter(&self) -> Result<AttemptFilter, ApiError> {
        Ok(AttemptFilter {
            status: status_filter(self.status)?,
            status_code_class: self.status_code_class,
            endpoint_id: self.endpoint_id.clone(),
            before: self.before,
            after: self.after,
            channel: self.channel.clone(),
            tag: self.tag.clone(),
            event_types: self.event_types.as_ref().map(|s| s.split(',').map(str::to_owned).collect()),
        })
    }
}

/// The endpoint's attempts, newest first.
#[utoipa::path(params(PageQuery, AttemptQuery), tag = "Message Attempt", operation_id = "v1.message-attempt.list-by-endpoint", responses((status = 200, body = Page<AttemptOut>)))]
#[get("/app/{app_id}/attempt/endpoint/{endpoint_id}")]
async fn by_endpoint(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    page: web::Query<PageQuery>,
    q: web::Query<AttemptQuery>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = crud::find_any(&state, &tenant, &path.0, &path.1).await?;
    let (page, filter) = (page.page::<AttemptId>()?, q.filter()?);
    let found =
        state.read(async |c| attempts::list(c, &tenant.0, &app, Scope::Endpoint(&ep.id), &page, &filter).await).await?;
    Ok(HttpResponse::Ok().json(found.map(AttemptOut::from)))
}

/// Counted at most this far, as Svix counts (past it, `approximated`).
const MOST_COUNTED: i64 = 10_000;

/// How many attempts `…/attempt/endpoint/{ep}` would list with these filters.
#[derive(Serialize, ToSchema)]
#[schema(as = CountOut)]
struct CountOut {
    count: i64,
    /// More than `count` match: counting stopped there.
    approximated: bool,
}

/// Like the endpoint's attempt list, but the count only (up to 10,000).
#[utoipa::path(params(AttemptQuery), tag = "Message Attempt", operation_id = "v1.message-attempt.count-by-endpoint", responses((status = 200, body = CountOut)))]
#[get("/app/{app_id}/attempt/endpoint/{endpoint_id}/count")]
async fn count_by_endpoint(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    q: web::Query<AttemptQuery>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = crud::find_any(&state, &tenant, &path.0, &path.1).await?;
    let filter = q.filter()?;
    let (count, approximated) =
        state.read(async |c| attempts::count(c, &tenant.0, &app, &ep.id, &filter, MOST_COUNTED).await).await?;
    Ok(HttpResponse::Ok().json(CountOut { count, approximated }))
}

/// The message's attempts, newest first.
#[utoipa::path(params(PageQuery, AttemptQuery), tag = "Message Attempt", operation_id = "v1.message-attempt.list-by-msg", responses((status = 200, body = Page<AttemptOut>)))]
#[get("/app/{app_id}/attempt/msg/{msg_id}")]
async fn by_msg(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>)>,
    page: web::Query<PageQuery>,
    q: web::Query<AttemptQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path.0).await?;
    // The message on the primary (it may have been made a moment ago), its attempts where reads go.
    let msg = {
        let conn = db::conn(&state.db).await?;
        messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?
    };
    let (page, filter) = (page.page::<AttemptId>()?, q.filter()?);
    let found = state
        .read(async |c| attempts::list(c, &tenant.0, &app.id, Scope::Message(&msg.id), &page, &filter).await)
        .await?;
    Ok(HttpResponse::Ok().json(found.map(AttemptOut::from)))
}

/// One attempt of the message.
#[utoipa::path(tag = "Message Attempt", operation_id = "v1.message-attempt.get", responses((status = 200, body = AttemptOut)))]
#[get("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}")]
async fn get_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>, AttemptId)>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(AttemptOut::from(find_attempt(&state, &tenant, &path).await?)))
}

/// The attempt a `…/msg/{msg_id}/attempt/{attempt_id}` path names, in the
/// tenant's application and that message; 404 for any of them missing.
pub(super) async fn find_attempt(
    state: &AppState,
    tenant: &TenantAuth,
    (app, msg, attempt): &(Ref<AppId>, Ref<MessageId>, AttemptId),
) -> Result<Attempt, ApiError> {
    let app = find_app(state, tenant, app).await?;
    let conn = db::conn(&state.db).await?;
    let msg = messages::get(&**conn, &tenant.0, &app.id, msg).await?.ok_or(ApiError::NotFound("message"))?;
    attempts::get(&**conn, &tenant.0, &app.id, &msg.id, attempt).await?.ok_or(ApiError::NotFound("attempt"))
}

/// An endpoint the message was sent to, and how its delivery stands.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MessageEndpointOut)]
struct DestinationOut {
    #[serde(flatten)]
    endpoint: EndpointOut,
    status: DeliveryStatus,
    /// The status in words, as in `MessageAttemptOut`.
    #[schema(example = "pending")]
    status_text: &'static str,
    /// When the next try is due, while the delivery is pending.
    next_attempt: Option<DateTime<Utc>>,
}

/// The endpoints the message was sent to, with each delivery's status.
#[utoipa::path(params(PageQuery), tag = "Message Attempt", operation_id = "v1.message-attempt.list-attempted-destinations", responses((status = 200, body = Page<DestinationOut>)))]
#[get("/app/{app_id}/msg/{msg_id}/endpoint")]
async fn destinations(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>)>,
    page: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = find_app(&state, &tenant, &path.0).await?;
    let msg = {
        let conn = db::conn(&state.db).await?;
        messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?
    };
    let page = page.page::<EndpointId>()?;
    let found = state.read(async |c| delivery_views::destinations(c, &tenant.0, &app.id, &msg.id, &page).await).await?;
    Ok(HttpResponse::Ok().json(found.map(|(e, d)| DestinationOut {
        endpoint: e.into(),
        status: d.status,
        status_text: d.status.text(),
        next_attempt:
            d.next_attempt_at.filter(|_| matches!(d.status, DeliveryStatus::Pending | DeliveryStatus::Sending)),
    })))
}

/// A message sent to the endpoint, and how its delivery stands.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointMessageOut {
    #[serde(flatten)]
    message: MessageOut,
    status: DeliveryStatus,
    /// The status in words, as in `MessageAttemptOut`.
    #[schema(example = "pending")]
    status_text: &'static str,
    /// When the next try is due, while the delivery is pending.
    next_attempt: Option<DateTime<Utc>>,
}

/// `?status=`: only deliveries of this status.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StatusQuery {
    status: Option<i16>,
}

/// A `status` filter: one of Svix's four numbers, or 422 naming it.
pub(super) fn status_filter(status: Option<i16>) -> Result<Option<DeliveryStatus>, ApiError> {
    status
        .map(|s| {
            DeliveryStatus::from_code(s).ok_or_else(|| {
                ApiError::Validation(format!(
                    "`status` must be 0 (success), 1 (pending), 2 (fail) or 3 (sending), not {s}"
                ))
            })
        })
        .transpose()
}

impl StatusQuery {
    fn status(&self) -> Result<Option<DeliveryStatus>, ApiError> {
        status_filter(self.status)
    }
}

/// The messages sent to the endpoint, with each delivery's status.
#[utoipa::path(params(PageQuery, MessageListQuery, StatusQuery, ContentQuery), tag = "Message Attempt", operation_id = "v1.message-attempt.list-attempted-messages", responses((status = 200, body = Page<EndpointMessageOut>)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/msg")]
async fn attempted_messages(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    page: web::Query<PageQuery>,
    q: web::Query<MessageListQuery>,
    s: web::Query<StatusQuery>,
    c: web::Query<ContentQuery>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = crud::find_any(&state, &tenant, &path.0, &path.1).await?;
    let (page, status, filter) = (page.page::<MessageId>()?, s.status()?, q.filter());
    let found = state
        .read(async |c| delivery_views::attempted_messages(c, &tenant.0, &app, &ep.id, &page, status, &filter).await)
        .await?;
    Ok(HttpResponse::Ok().json(found.map(|(m, d)| EndpointMessageOut {
        message: MessageOut::new(m, c.with_content()),
        status: d.status,
        status_text: d.status.text(),
        next_attempt:
            d.next_attempt_at.filter(|_| matches!(d.status, DeliveryStatus::Pending | DeliveryStatus::Sending)),
    })))
}

/// Schedules one manual attempt; its `webhook-id` is the message id, as on every try.
#[utoipa::path(tag = "Message Attempt", operation_id = "v1.message-attempt.resend", responses((status = 202, body = crate::openapi::EmptyResponse)))]
#[post("/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend")]
async fn resend(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>, Ref<EndpointId>)>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = crud::find_any(&state, &tenant, &path.0, &path.2).await?;
    crud::has_deliveries(&ep)?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let msg = messages::get(&*tx, &tenant.0, &app, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    if msg.payload.is_none() {
        return Err(ApiError::Conflict("the message's payload expired or was expunged: it cannot be resent".into()));
    }
    // Gone since it was read (its retention, its partition's drop): not found.
    if !deliveries::resend(&*tx, &tenant.0, &app, &msg.id, &ep.id).await? {
        return Err(ApiError::NotFound("message"));
    }
    // `{}`: current Svix SDKs parse the body of this 202.
    let res = answer(&*tx, &state, key.as_deref(), StatusCode::ACCEPTED, &crate::openapi::EmptyResponse {}).await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.wake.poke();
    Ok(res)
}

/// Svix's `v1.message-attempt.expunge-content`: the response body the endpoint
/// returned is erased; the attempt reads `EXPUNGED`.
#[utoipa::path(tag = "Message Attempt", operation_id = "v1.message-attempt.expunge-content", responses((status = 204, description = "the response body was erased")))]
#[delete("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content")]
async fn expunge_content(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<MessageId>, AttemptId)>,
) -> Result<HttpResponse, ApiError> {
    // The tenant's alone: a customer with a portal token cannot erase content.
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path.0).await?;
    let conn = db::conn(&state.db).await?;
    let msg = messages::get(&**conn, &tenant.0, &app.id, &path.1).await?.ok_or(ApiError::NotFound("message"))?;
    if !erasure::expunge_attempt(&**conn, &tenant.0, &app.id, &msg.id, &path.2).await? {
        return Err(ApiError::NotFound("attempt"));
    }
    Ok(HttpResponse::NoContent().finish())
}
