//! Svix's `v1.message.broadcast`: a background task that publishes one message to
//! every application of a tenant, a bounded batch of applications per step.
//!
//! A step is one transaction that holds the task's row: the messages it
//! publishes and the cursor that moves past their applications commit together,
//! so a crash loses or repeats no batch. Each message also carries the task's
//! eventId (the request's, or the task id), unique per application: a task run
//! again from its start (or any repeat) finds the eventId taken and publishes
//! nothing twice.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio_postgres::GenericClient;

use super::messages::{self, NewMessage};
use super::tasks::{self, Task, TaskKind, TaskStatus};
use super::{usage, StoreError};
use crate::ids::{AppId, MessageId, Ref, TaskId, TenantId};

/// The message a broadcast publishes, kept in the task's `filter`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastMessage {
    pub event_type: String,
    /// Set by [`create`] when the request gave none: the task's id.
    #[serde(default)]
    pub event_id: String,
    /// The payload's exact text, delivered byte for byte.
    pub payload: String,
    pub channels: Option<Vec<String>>,
    /// How long each message's payload is kept, counted from when that message
    /// is published (a broadcast may take hours to reach its last application).
    pub payload_retention_hours: Option<i64>,
}

/// How many broadcasts of the tenant are running, counted under a lock of the
/// tenant's row held until `db`'s transaction ends (as [`tasks::running`]).
pub async fn running(db: &impl GenericClient, tenant: &TenantId) -> Result<i64, StoreError> {
    db.execute("SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE", &[&tenant.as_str()]).await?;
    let row = db
        .query_one(
            "SELECT count(*) FROM background_tasks WHERE tenant_id = $1 AND status = 0 AND kind = $2",
            &[&tenant.as_str(), &TaskKind::Broadcast.code()],
        )
        .await?;
    Ok(row.get(0))
}

/// Records a running broadcast; its eventId defaults to the task's id.
pub async fn create(db: &impl GenericClient, tenant: &TenantId, m: &BroadcastMessage) -> Result<Task, StoreError> {
    let id = TaskId::generate();
    let mut m = m.clone();
    if m.event_id.is_empty() {
        m.event_id = id.to_string();
    }
    let filter = serde_json::to_value(&m).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let row = db
        .query_one(
            &format!(
                "INSERT INTO background_tasks (tenant_id, id, kind, endpoint_id, since, until, filter)
                 VALUES ($1, $2, $3, '', 'epoch', now(), $4)
                 RETURNING {}",
                tasks::COLUMNS
            ),
            &[&tenant.as_str(), &id.as_str(), &TaskKind::Broadcast.code(), &filter],
        )
        .await?;
    Ok(tasks::from_row(&row))
}

/// A broadcast a step holds: its row is locked until the step's transaction ends.
#[derive(Debug)]
pub struct Held {
    pub tenant: TenantId,
    pub task: TaskId,
    pub message: BroadcastMessage,
    /// The last application id done ('' before the first step).
    pub cursor: String,
}

/// The running broadcast stepped least lately, of any tenant, held for the
/// caller's transaction; one another runner holds is skipped.
pub async fn pick(db: &impl GenericClient) -> Result<Option<Held>, StoreError> {
    let Some(row) = db
        .query_opt(
            "SELECT tenant_id, id, filter, cursor FROM background_tasks
             WHERE status = 0 AND kind = $1
             ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED",
            &[&TaskKind::Broadcast.code()],
        )
        .await?
    else {
        return Ok(None);
    };
    let message =
        serde_json::from_value(row.get("filter")).map_err(|e| StoreError::Corrupt(format!("a broadcast: {e}")))?;
    Ok(Some(Held {
        tenant: TenantId::from_db(row.get("tenant_id")),
        task: TaskId::from_db(row.get("id")),
        message,
        cursor: row.get("cursor"),
    }))
}

/// The tenant's next `limit` applications after `cursor`, by id (operational
/// webhooks' own applications are not the tenant's customers).
pub async fn apps_after(
    db: &impl GenericClient,
    tenant: &TenantId,
    cursor: &str,
    limit: i64,
) -> Result<Vec<AppId>, StoreError> {
    let rows = db
        .query(
            "SELECT id FROM applications WHERE tenant_id = $1 AND id > $2 AND NOT operational ORDER BY id LIMIT $3",
            &[&tenant.as_str(), &cursor, &limit],
        )
        .await?;
    Ok(rows.iter().map(|r| AppId::from_db(r.get(0))).collect())
}

/// What publishing to one application came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Published, with this many deliveries.
    Sent(u64),
    /// The application already has a message with the eventId: nothing was written.
    Already,
    /// The tenant's `messagesPerDay` is spent: nothing was written.
    OverCap,
}

/// Publishes the broadcast's message to one application (the fan-out of
/// [`messages::publish`]) and takes its place under the daily cap, both under a
/// savepoint of the step's transaction: either both stand or neither.
pub async fn publish_one(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    m: &BroadcastMessage,
    day_cap: Option<i64>,
) -> Result<Outcome, StoreError> {
    let new = NewMessage {
        id: MessageId::generate(),
        event_id: Some(m.event_id.clone()),
        event_type: m.event_type.clone(),
        channels: m.channels.clone(),
        tags: None,
        payload: m.payload.as_bytes().to_vec(),
        content_type: "application/json".into(),
        idempotency_key: None,
        request_key: None,
        traceparent: None,
        payload_expires_at: m.payload_retention_hours.map(|h| Utc::now() + chrono::Duration::hours(h)),
    };
    tx.batch_execute("SAVEPOINT broadcast_app").await?;
    let published = messages::publish(tx, tenant, &Ref::Id(app.clone()), &new).await;
    let outcome = match published {
        Ok(Some((_, fanned))) => match day_cap {
            Some(cap) if usage::reserve_messages(tx, tenant, cap, 1).await?.is_none() => Outcome::OverCap,
            _ => Outcome::Sent(fanned),
        },
        // Deleted since the batch was listed: nothing to send it.
        Ok(None) => Outcome::Sent(0),
        Err(StoreError::Conflict(_)) => Outcome::Already,
        Err(e) => return Err(e),
    };
    let undo = if matches!(outcome, Outcome::Sent(_)) {
        "RELEASE SAVEPOINT broadcast_app"
    } else {
        "ROLLBACK TO SAVEPOINT broadcast_app"
    };
    tx.batch_execute(undo).await?;
    Ok(outcome)
}

/// Ends a step: the cursor moves to `last` (if any), `sent` grows, and the task
/// ends finished when `done`; in any case it goes to the back of the line.
pub async fn advance(
    db: &impl GenericClient,
    tenant: &TenantId,
    task: &TaskId,
    last: Option<&str>,
    (scanned, sent): (i64, i64),
    done: bool,
) -> Result<(), StoreError> {
    let status = if done { TaskStatus::Finished } else { TaskStatus::Running };
    db.execute(
        "UPDATE background_tasks SET cursor = COALESCE($3, cursor), scanned = scanned + $4, sent = sent + $5,
             status = $6, updated_at = now()
         WHERE tenant_id = $1 AND id = $2",
        &[&tenant.as_str(), &task.as_str(), &last, &scanned, &sent, &status.code()],
    )
    .await?;
    Ok(())
}
