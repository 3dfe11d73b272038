//! An endpoint's own message operations: `v1.message.test-attempt` (one message
//! to this endpoint only, answered with its attempt) and `v1.endpoint.cancel-msgs`
//! (its pending deliveries of messages made before a time end canceled).

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{self, AppId, EndpointId, MessageId, Ref},
    store::{
        attempts::{self, AttemptFilter, Scope},
        cancel,
        messages::{self, NewMessage},
        page::PageRequest,
    },
    AppState,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::attempts::AttemptOut;
use crate::v1::endpoint::crud::{find, find_any, has_deliveries};
use crate::v1::validate;
use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(test_attempt).service(cancel_msgs);
}

/// The message a test attempt sends (Svix's `MessageIn`). Only `eventType` and
/// `payload` are taken: a test message is the endpoint's alone, so what files a
/// message for fan-out or lookup (`eventId`, `channels`, `tags`, an inline
/// `application`, retention, a raw payload) is refused, named, when set.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = MessageTestIn)]
struct TestIn {
    event_type: String,
    #[schema(value_type = Object)]
    payload: Box<RawValue>,
    event_id: Option<serde_json::Value>,
    channels: Option<serde_json::Value>,
    tags: Option<serde_json::Value>,
    application: Option<serde_json::Value>,
    payload_retention_period: Option<serde_json::Value>,
    payload_retention_hours: Option<serde_json::Value>,
    transformations_params: Option<serde_json::Value>,
}

impl TestIn {
    fn check(&self) -> Result<(), ApiError> {
        validate::uid("eventType", &self.event_type)?;
        if !self.payload.get().trim_start().starts_with('{') {
            return Err(ApiError::Validation("`payload` must be a JSON object".into()));
        }
        let set = |v: &Option<serde_json::Value>| v.as_ref().is_some_and(|v| !v.is_null());
        let unserved = [
            ("eventId", set(&self.event_id)),
            ("channels", set(&self.channels)),
            ("tags", set(&self.tags)),
            ("application", set(&self.application)),
            ("payloadRetentionPeriod", set(&self.payload_retention_period)),
            ("payloadRetentionHours", set(&self.payload_retention_hours)),
            ("transformationsParams", set(&self.transformations_params)),
        ];
        let named: Vec<_> = unserved.iter().filter(|(_, s)| *s).map(|(n, _)| format!("`{n}`")).collect();
        if !named.is_empty() {
            return Err(ApiError::Validation(format!(
                "{}: not taken by a test attempt (it sends `eventType` and `payload` to this endpoint only)",
                named.join(", ")
            )));
        }
        Ok(())
    }
}

/// How often the handler looks for the attempt while it waits.
const POLL: Duration = Duration::from_millis(100);

/// Sends one message to this endpoint only, past its filters (as `send-example`
/// does), and answers its first attempt once the worker has recorded it. The
/// wait is bounded by the egress timeout and two seconds: if no attempt is
/// recorded by then (the workers are behind), 504 `attempt_not_recorded` names
/// the message, whose attempts are read as any message's.
#[utoipa::path(
    tag = "Message",
    operation_id = "v1.message.test-attempt",
    request_body = TestIn,
    responses((status = 201, body = AttemptOut), (status = 504, description = "the message was sent, its attempt not recorded in time"))
)]
#[post("/app/{app_id}/endpoint/{endpoint_id}/msg/test-attempt")]
async fn test_attempt(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<TestIn>,
) -> Result<HttpResponse, ApiError> {
    body.check()?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    has_deliveries(&ep)?;
    if ep.disabled {
        return Err(ApiError::Validation("the endpoint is disabled: enable it to send it a test attempt".into()));
    }
    // A message like any other: within the tenant's message quotas.
    let reservation = crate::quota::admit_message(&state, &tenant.0).await?;
    let new = NewMessage {
        id: MessageId::generate(),
        event_id: None,
        event_type: body.event_type.clone(),
        channels: None,
        tags: None,
        payload: body.payload.get().as_bytes().to_vec(),
        content_type: "application/json".into(),
        idempotency_key: None,
        request_key: None,
        traceparent: None,
        payload_expires_at: None,
    };
    let published = async {
        let conn = db::conn(&state.db).await?;
        Ok::<_, ApiError>(messages::publish_to_endpoint(&**conn, &tenant.0, &app, &ep.id, &new).await?)
    }
    .await;
    let msg = match published {
        Ok(Some(m)) => m,
        other => {
            if let Some(r) = reservation {
                crate::quota::message_not_created(&state, &tenant.0, r).await;
            }
            return match other {
                Err(e) => Err(e),
                _ => Err(ApiError::Validation("the endpoint is disabled or gone: nothing was sent".into())),
            };
        }
    };
    state.wake.poke();
    let waited = state.config.egress_timeout + Duration::from_secs(2);
    let deadline = tokio::time::Instant::now() + waited;
    let page = PageRequest::new(Some(1), None);
    loop {
        let conn = db::conn(&state.db).await?;
        let found =
            attempts::list(&**conn, &tenant.0, &app, Scope::Message(&msg.id), &page, &AttemptFilter::default()).await?;
        drop(conn);
        if let Some(a) = found.data.into_iter().next() {
            return Ok(HttpResponse::Created().json(AttemptOut::from(a)));
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(ApiError::Coded {
                status: StatusCode::GATEWAY_TIMEOUT,
                code: "attempt_not_recorded",
                detail: format!(
                    "message {} was sent to the endpoint; no attempt was recorded within {}s: \
                     read it later with GET /api/v1/app/{app}/attempt/msg/{}",
                    msg.id,
                    waited.as_secs(),
                    msg.id
                ),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Svix's `CancelMsgsIn`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelMsgsIn {
    /// Deliveries of messages made before this end canceled.
    #[serde(deserialize_with = "crate::when::at")]
    created_before: DateTime<Utc>,
}

/// Rows one statement cancels at most: each batch is short, whatever the backlog.
const CANCEL_BATCH: i64 = 1000;

/// Cancels the endpoint's pending deliveries (waiting for their first try or a
/// retry) of messages made before `createdBefore`: they end `canceled` (4) and
/// are not tried again. A delivery being sent at that moment (held by a worker)
/// is left to finish; should that attempt fail, its retries go on (call again
/// to cancel them). Runs in batches of 1,000, each its own statement: a backlog
/// larger than the request's time allows answers 503 with what was canceled so
/// far kept, and a second call goes on.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.cancel-msgs", request_body = CancelMsgsIn, responses((status = 204, description = "the pending deliveries were canceled")))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/cancel-msgs")]
async fn cancel_msgs(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<CancelMsgsIn>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find_any(&state, &tenant, &path.0, &path.1).await?;
    has_deliveries(&ep)?;
    let before = ids::floor(MessageId::PREFIX, body.created_before);
    let mut after = String::new();
    let mut total = 0;
    loop {
        let conn = db::conn(&state.db).await?;
        let done = cancel::cancel_batch(&**conn, &tenant.0, &app, &ep.id, (&after, &before), CANCEL_BATCH).await?;
        total += done.canceled;
        match done.last {
            Some(last) if done.picked >= CANCEL_BATCH => after = last,
            _ => break,
        }
    }
    tracing::info!(endpoint = %ep.id, canceled = total, "pending deliveries canceled");
    Ok(HttpResponse::NoContent().finish())
}
