//! Svix's `v1.message.broadcast`: one message to every application of the tenant,
//! published by a background task (`message.broadcast`) the workers run in steps
//! (`hookgate_egress::broadcast`).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::TaskId,
    store::{
        broadcast::{self, BroadcastMessage},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::validate;
use crate::idempotency::{answer, RequestKey};
use crate::KeyAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create);
}

/// Broadcasts a tenant may have running at once; more wait for one to end (409).
const MOST_RUNNING: i64 = 1;

/// The message to publish to every application.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessageBroadcastIn {
    event_type: String,
    /// Kept as the exact bytes sent: every application's message is this, byte for byte.
    #[schema(value_type = Object)]
    payload: Box<RawValue>,
    /// Every application's message carries it (absent: the task's id), which is
    /// what keeps a broadcast from reaching an application twice.
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    /// Days the payloads are kept (1 to 90); not with the next.
    payload_retention_period: Option<i64>,
    /// Hours the payloads are kept (1 to 2160).
    payload_retention_hours: Option<i64>,
}

/// The broadcast's task (Svix's `MessageBroadcastOut`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct MessageBroadcastOut {
    id: TaskId,
    /// `running`, `finished` or `failed`.
    #[schema(example = "running")]
    status: &'static str,
    /// `message.broadcast`.
    #[schema(example = "message.broadcast")]
    task: &'static str,
    updated_at: DateTime<Utc>,
}

fn checked(body: &MessageBroadcastIn) -> Result<BroadcastMessage, ApiError> {
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
    let hours = super::message::crud::retention_hours(body.payload_retention_period, body.payload_retention_hours, 1)?;
    Ok(BroadcastMessage {
        event_type: body.event_type.clone(),
        event_id: body.event_id.clone().unwrap_or_default(),
        payload: body.payload.get().to_owned(),
        channels: body.channels.clone(),
        payload_retention_hours: hours,
    })
}

/// Publishes the message to every application of the tenant (its operational
/// webhooks' aside), as a background task: 202 with the task, which
/// `GET /api/v1/background-task/{id}` follows (`data.messagesSent`: applications
/// published to). Each application's message goes through the fan-out as one
/// created there would, under the tenant's message quotas (a spent quota holds
/// the task back, it never skips an application), and carries the eventId, so
/// that no application gets it twice.
#[utoipa::path(tag = "Broadcast", operation_id = "v1.message.broadcast", request_body = MessageBroadcastIn, responses((status = 202, body = MessageBroadcastOut)))]
#[post("/msg/broadcast")]
async fn create(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<MessageBroadcastIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let message = checked(&body)?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let running = broadcast::running(&*tx, &key.0).await?;
    if running >= MOST_RUNNING {
        return Err(ApiError::Conflict(format!(
            "{running} broadcasts are running: at most {MOST_RUNNING} at once; wait for one to end"
        )));
    }
    let task = broadcast::create(&*tx, &key.0, &message).await?;
    let out = MessageBroadcastOut {
        id: task.id.clone(),
        status: task.status.name(),
        task: task.kind.name(),
        updated_at: task.updated_at,
    };
    // Kept with the task under the request's Idempotency-Key: a retry does not start a second one.
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::ACCEPTED, &out).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(task = %task.id, "broadcast started");
    Ok(res)
}
