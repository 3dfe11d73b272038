//! The `background_tasks` table: endpoint replays and recoveries and content purges a
//! request starts and the workers finish in steps (`store::replay`), and statistics
//! answered at once and recorded finished; read back through `/api/v1/background-task`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{AppId, EndpointId, TaskId, TenantId};

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// `replay-missing`: the endpoint gets what its filters would have given it
    /// in a window and it never got.
    Replay,
    /// `bulk-replay`: the endpoint gets again what it was sent in a window, filtered.
    BulkReplay,
    /// `recover`: the endpoint's failed deliveries of a window start their schedule again.
    Recover,
    /// `expunge-all-contents`: every message of the application made before the
    /// request loses its payload.
    PurgeContent,
    /// `aggregate_app_stats`: messages per application in a window.
    AppStats,
    /// `aggregate_event_types`: the event types the tenant's messages used.
    EventTypeAggregate,
    /// `msg/broadcast`: one message to every application of the tenant
    /// (`store::broadcast`, stepped by its own runner).
    Broadcast,
    /// `event-type/export/openapi`: the tenant's event types as an OpenAPI
    /// document's webhooks, answered at once.
    SdkGenerate,
}

/// Every kind, for names read from a query string.
const KINDS: [TaskKind; 8] = [
    TaskKind::Replay,
    TaskKind::BulkReplay,
    TaskKind::Recover,
    TaskKind::PurgeContent,
    TaskKind::AppStats,
    TaskKind::EventTypeAggregate,
    TaskKind::Broadcast,
    TaskKind::SdkGenerate,
];

impl TaskKind {
    pub const fn code(self) -> i16 {
        match self {
            TaskKind::Replay => 0,
            TaskKind::BulkReplay => 1,
            TaskKind::Recover => 2,
            TaskKind::PurgeContent => 3,
            TaskKind::AppStats => 4,
            TaskKind::EventTypeAggregate => 5,
            TaskKind::Broadcast => 6,
            TaskKind::SdkGenerate => 7,
        }
    }

    pub(super) fn from_db(code: i16) -> Self {
        match code {
            1 => TaskKind::BulkReplay,
            2 => TaskKind::Recover,
            3 => TaskKind::PurgeContent,
            4 => TaskKind::AppStats,
            5 => TaskKind::EventTypeAggregate,
            6 => TaskKind::Broadcast,
            7 => TaskKind::SdkGenerate,
            _ => TaskKind::Replay,
        }
    }

    /// The name Svix's API gives it (`BackgroundTaskType`).
    pub const fn name(self) -> &'static str {
        match self {
            TaskKind::Replay => "endpoint.replay",
            TaskKind::BulkReplay => "endpoint.bulk-replay",
            TaskKind::Recover => "endpoint.recover",
            TaskKind::PurgeContent => "application.purge_content",
            TaskKind::AppStats => "application.stats",
            TaskKind::EventTypeAggregate => "event-type.aggregate",
            TaskKind::Broadcast => "message.broadcast",
            TaskKind::SdkGenerate => "sdk.generate",
        }
    }

    /// A name from a query string; `None` for a type Hookgate runs no task of.
    pub fn from_name(s: &str) -> Option<Self> {
        KINDS.into_iter().find(|k| k.name() == s)
    }
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Running,
    Finished,
    /// Stopped before the end; `Task::failure` says why.
    Failed,
}

impl TaskStatus {
    pub const fn code(self) -> i16 {
        match self {
            TaskStatus::Running => 0,
            TaskStatus::Finished => 1,
            TaskStatus::Failed => 2,
        }
    }

    pub(super) fn from_db(code: i16) -> Self {
        match code {
            0 => TaskStatus::Running,
            1 => TaskStatus::Finished,
            _ => TaskStatus::Failed,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Finished => "finished",
            TaskStatus::Failed => "failed",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        [TaskStatus::Running, TaskStatus::Finished, TaskStatus::Failed].into_iter().find(|k| k.name() == s)
    }
}

/// Bulk replay's filters, beside the window. Each one given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFilter {
    pub event_types: Option<Vec<String>>,
    pub channel: Option<String>,
    pub tag: Option<String>,
    /// The delivery's status to the endpoint, as its code (`DeliveryStatus::code`).
    pub status: Option<i16>,
    /// The class of the last attempt's response status: 0 (no response), 100 … 500.
    pub status_code_class: Option<i32>,
}

/// A task as the API shows it.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: TaskId,
    pub kind: TaskKind,
    pub status: TaskStatus,
    /// `None` for a task of the whole tenant.
    pub app_id: Option<AppId>,
    /// `None` for a task of an application or of the tenant.
    pub endpoint_id: Option<EndpointId>,
    /// Messages looked at so far, and deliveries made due (a purge: payloads erased) by the task.
    pub scanned: i64,
    pub sent: i64,
    pub failure: Option<String>,
    pub updated_at: DateTime<Utc>,
    /// A statistics task's result, as its `data`.
    pub data: Option<serde_json::Value>,
}

pub(super) const COLUMNS: &str = "id, kind, status, app_id, endpoint_id, scanned, sent, failure, updated_at, data";

pub(super) fn from_row(r: &Row) -> Task {
    Task {
        id: TaskId::from_db(r.get("id")),
        kind: TaskKind::from_db(r.get("kind")),
        status: TaskStatus::from_db(r.get("status")),
        app_id: r.get::<_, Option<String>>("app_id").map(AppId::from_db),
        endpoint_id: r.get::<_, Option<String>>("endpoint_id").filter(|e| !e.is_empty()).map(EndpointId::from_db),
        scanned: r.get("scanned"),
        sent: r.get("sent"),
        failure: r.get("failure"),
        updated_at: r.get("updated_at"),
        data: r.get("data"),
    }
}

/// What a new task is to do. Its window ends no later than its creation: later
/// messages reach the endpoint by fan-out, and a replay never chases live ones.
pub struct NewTask<'a> {
    pub kind: TaskKind,
    pub app: &'a AppId,
    pub endpoint: &'a EndpointId,
    pub since: DateTime<Utc>,
    /// `None`: up to now, the task's creation (later messages reach the endpoint by fan-out).
    pub until: Option<DateTime<Utc>>,
    pub filter: &'a ReplayFilter,
}

/// Records a running task; the workers pick it up within their poll.
pub async fn create(db: &impl GenericClient, tenant: &TenantId, new: &NewTask<'_>) -> Result<Task, StoreError> {
    let filter = serde_json::to_value(new.filter).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let row = db
        .query_one(
            &format!(
                "INSERT INTO background_tasks (tenant_id, id, kind, app_id, endpoint_id, since, until, filter)
                 VALUES ($1, $2, $3, $4, $5, $6, LEAST(COALESCE($7, now()), now()), $8)
                 RETURNING {COLUMNS}"
            ),
            &[
                &tenant.as_str(),
                &TaskId::generate().as_str(),
                &new.kind.code(),
                &new.app.as_str(),
                &new.endpoint.as_str(),
                &new.since,
                &new.until,
                &filter,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// Records a purge of the application's message contents, running; it covers
/// messages made up to now.
pub async fn create_purge(db: &impl GenericClient, tenant: &TenantId, app: &AppId) -> Result<Task, StoreError> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO background_tasks (tenant_id, id, kind, app_id, endpoint_id, since, until)
                 VALUES ($1, $2, $3, $4, '', 'epoch', now())
                 RETURNING {COLUMNS}"
            ),
            &[&tenant.as_str(), &TaskId::generate().as_str(), &TaskKind::PurgeContent.code(), &app.as_str()],
        )
        .await?;
    Ok(from_row(&row))
}

/// Records a task answered at once (statistics), finished, with its result.
pub async fn create_finished(
    db: &impl GenericClient,
    tenant: &TenantId,
    kind: TaskKind,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    data: &serde_json::Value,
) -> Result<Task, StoreError> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO background_tasks (tenant_id, id, kind, status, since, until, data)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 RETURNING {COLUMNS}"
            ),
            &[
                &tenant.as_str(),
                &TaskId::generate().as_str(),
                &kind.code(),
                &TaskStatus::Finished.code(),
                &since,
                &until,
                data,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// For each task of `kind` the tenant started in the last hour, oldest first, the
/// whole seconds until it leaves that hour (at least 1). Bounded by the hourly
/// limit itself (and the few a burst may slip past it).
pub async fn leaving_the_hour(
    db: &impl GenericClient,
    tenant: &TenantId,
    kind: TaskKind,
) -> Result<Vec<i64>, StoreError> {
    let rows = db
        .query(
            "SELECT greatest(ceil(extract(epoch FROM created_at + interval '1 hour' - now())), 1)::int8
             FROM background_tasks
             WHERE tenant_id = $1 AND kind = $2 AND created_at > now() - interval '1 hour'
             ORDER BY created_at",
            &[&tenant.as_str(), &kind.code()],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// How many of the tenant's tasks are running, counted under a lock of the
/// tenant's row held until `db`'s transaction ends: two requests in their own
/// transactions cannot both see room for one more.
/// Returns the tenant's count and the application's.
pub async fn running(db: &impl GenericClient, tenant: &TenantId, app: &AppId) -> Result<(i64, i64), StoreError> {
    db.execute("SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE", &[&tenant.as_str()]).await?;
    let row = db
        .query_one(
            "SELECT count(*) AS tenant_running, count(*) FILTER (WHERE app_id = $2) AS app_running FROM background_tasks
             WHERE tenant_id = $1 AND status = 0",
            &[&tenant.as_str(), &app.as_str()],
        )
        .await?;
    Ok((row.get("tenant_running"), row.get("app_running")))
}

pub async fn get(db: &impl GenericClient, tenant: &TenantId, id: &TaskId) -> Result<Option<Task>, StoreError> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM background_tasks WHERE tenant_id = $1 AND id = $2"),
            &[&tenant.as_str(), &id.as_str()],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// A page of the tenant's tasks, newest first unless the page asks otherwise.
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    status: Option<TaskStatus>,
    kind: Option<TaskKind>,
    page: &PageRequest,
) -> Result<Page<Task>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM background_tasks
                 WHERE tenant_id = $1 AND ($2::smallint IS NULL OR status = $2) AND ($3::smallint IS NULL OR kind = $3)
                   AND ($4::text IS NULL OR id {cmp} $4)
                 ORDER BY id {dir} LIMIT $5"
            ),
            &[&tenant.as_str(), &status.map(TaskStatus::code), &kind.map(TaskKind::code), &key, &page.fetch_limit()],
        )
        .await?;
    let tasks = rows.iter().map(from_row).collect();
    Ok(Page::from_rows(tasks, page, |t| t.id.to_string()))
}

/// Removes up to `limit` tasks that ended more than `days` ago, of every tenant;
/// how many.
pub async fn prune_ended(db: &impl GenericClient, days: i32, limit: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM background_tasks WHERE (tenant_id, id) IN (
                SELECT tenant_id, id FROM background_tasks
                WHERE status <> 0 AND updated_at < now() - make_interval(days => $1) LIMIT $2)",
            &[&days, &limit],
        )
        .await?;
    Ok(n)
}
