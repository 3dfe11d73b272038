//! Endpoint replays and recoveries, and the background tasks that run them:
//! `replay-missing`, `bulk-replay`, `recover`, and `v1.background-task` (`list`, `get`), as Svix's SDKs call them.

use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use hookgate_shared::ids::{AppId, EndpointId, Ref, TaskId};
use hookgate_shared::status::DeliveryStatus;
use hookgate_shared::store::statistics::{AppEventTypes, AppUsage};
use hookgate_shared::store::tasks::{self, NewTask, ReplayFilter, Task, TaskKind, TaskStatus};
use hookgate_shared::store::{page::Page, StoreError};
use hookgate_shared::{db, http::ApiError, AppState};

use super::endpoint::crud::find_any as find;
use crate::idempotency::{answer, RequestKey};
use crate::{PageQuery, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(replay_missing).service(bulk_replay).service(recover).service(list).service(get_one);
}

/// Running tasks a tenant may have at once, and one application (a portal link
/// reaches one application: its customer cannot take all of the tenant's); more
/// wait for one to end (409).
const MOST_RUNNING: i64 = 50;
const MOST_RUNNING_PER_APP: i64 = 5;

/// Event types a bulk replay may name.
const MOST_EVENT_TYPES: usize = 250;

/// Longest channel or tag a filter may name, as for a message's own.
const MOST_FILTER_LEN: usize = 128;
/// How far back a recovery may reach, as in Svix.
const MOST_RECOVER_DAYS: i64 = 14;

/// An endpoint's path (its parameters are described from the route's template).
type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// A replay's or a recovery's window.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ReplayIn {
    #[serde(deserialize_with = "crate::when::at")]
    since: DateTime<Utc>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    until: Option<DateTime<Utc>>,
}

/// Bulk replay's body. Unknown fields are refused: a misspelt filter would
/// otherwise be dropped, and the replay send everything.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BulkReplayIn {
    #[serde(deserialize_with = "crate::when::at")]
    since: DateTime<Utc>,
    #[serde(default, deserialize_with = "crate::when::opt")]
    until: Option<DateTime<Utc>>,
    event_types: Option<Vec<String>>,
    channel: Option<String>,
    tag: Option<String>,
    status: Option<i16>,
    status_code_class: Option<i32>,
}

impl BulkReplayIn {
    /// The filters, checked: each names what a message or delivery can have.
    fn filter(&self) -> Result<ReplayFilter, ApiError> {
        let bad = |m: String| Err(ApiError::Validation(m));
        if let Some(types) = &self.event_types {
            if types.len() > MOST_EVENT_TYPES {
                return bad(format!("`eventTypes`: at most {MOST_EVENT_TYPES} names"));
            }
            if let Some(t) = types.iter().find(|t| t.is_empty() || t.len() > 256) {
                return bad(format!("`eventTypes`: `{}` is not an event type name (1-256 characters)", t.len()));
            }
        }
        for (name, v) in [("channel", &self.channel), ("tag", &self.tag)] {
            if v.as_ref().is_some_and(|v| v.is_empty() || v.len() > MOST_FILTER_LEN) {
                return bad(format!("`{name}`: 1-{MOST_FILTER_LEN} characters"));
            }
        }
        // 4 (canceled) is in the SDK's enum; no delivery is ever canceled, so it matches none.
        if let Some(s) = self.status.filter(|s| DeliveryStatus::from_code(*s).is_none() && *s != 4) {
            return bad(format!(
                "`status`: {s} is no message status (0 success, 1 pending, 2 failed, 3 sending, 4 canceled)"
            ));
        }
        if let Some(c) = self.status_code_class.filter(|c| ![0, 100, 200, 300, 400, 500].contains(c)) {
            return bad(format!("`statusCodeClass`: {c} is none of 0 (no response), 100, 200, 300, 400, 500"));
        }
        Ok(ReplayFilter {
            event_types: self.event_types.clone(),
            channel: self.channel.clone(),
            tag: self.tag.clone(),
            status: self.status,
            status_code_class: self.status_code_class,
        })
    }
}

/// Sends the endpoint every message of the window that its filters take and it
/// never got, each with its own id; run twice, the second sends nothing again.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.replay-missing", responses((status = 202, body = TaskStarted)))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/replay-missing")]
async fn replay_missing(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<ReplayIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let filter = ReplayFilter::default();
    start(&tenant, &state, &path, TaskKind::Replay, (body.since, body.until), &filter, key).await
}

/// Starts the retry schedule again for every failed delivery to the endpoint of a
/// message in the window.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.recover", responses((status = 202, body = TaskStarted)))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/recover")]
async fn recover(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<ReplayIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    // As Svix: a recovery reaches back 14 days at most.
    if body.since < chrono::Utc::now() - chrono::Duration::days(MOST_RECOVER_DAYS) {
        return Err(ApiError::Validation(format!("`since`: a recovery reaches back at most {MOST_RECOVER_DAYS} days")));
    }
    let filter = ReplayFilter::default();
    start(&tenant, &state, &path, TaskKind::Recover, (body.since, body.until), &filter, key).await
}

/// Sends the endpoint again every message of the window it was sent that the
/// filters match, delivered or not, each with its own id.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.bulk-replay", responses((status = 202, body = TaskStarted)))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/bulk-replay")]
async fn bulk_replay(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<BulkReplayIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let filter = body.filter()?;
    start(&tenant, &state, &path, TaskKind::BulkReplay, (body.since, body.until), &filter, key).await
}

/// Records the task and answers 202 with it (`ReplayOut`); the workers run it.
async fn start(
    tenant: &TenantAuth,
    state: &AppState,
    path: &EpPath,
    kind: TaskKind,
    (since, until): (DateTime<Utc>, Option<DateTime<Utc>>),
    filter: &ReplayFilter,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    if let Some(until) = until.filter(|u| *u <= since) {
        return Err(ApiError::Validation(format!("`until` ({until}) must be after `since` ({since})")));
    }
    if since > Utc::now() {
        return Err(ApiError::Validation(format!("`since` ({since}) is in the future: nothing was made then yet")));
    }
    let (app, ep) = find(state, tenant, &path.0, &path.1).await?;
    super::endpoint::crud::has_deliveries(&ep)?;
    // A delivery to a disabled endpoint ends unsent: the replay would use up
    // what the endpoint is to get once enabled.
    if ep.disabled {
        return Err(ApiError::Conflict("the endpoint is disabled: enable it, then replay".into()));
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    room_for_a_task(&tx, &tenant.0, &app).await?;
    let new = NewTask { kind, app: &app, endpoint: &ep.id, since, until, filter };
    let task = tasks::create(&*tx, &tenant.0, &new).await?;
    let res = answer(&*tx, state, key.as_deref(), StatusCode::ACCEPTED, &task_started(&task)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(task = %task.id, kind = task.kind.name(), endpoint = %ep.id, "background task started");
    Ok(res)
}

/// Refuses (409) a task past the tenant's caps on running tasks: counted under the
/// tenant's row lock, in the task's transaction, so two requests cannot both be
/// the one that fills a cap.
async fn room_for_a_task(
    tx: &db::Transaction<'_>,
    tenant: &hookgate_shared::ids::TenantId,
    app: &AppId,
) -> Result<(), ApiError> {
    let (running, in_app) = tasks::running(&**tx, tenant, app).await?;
    if running >= MOST_RUNNING || in_app >= MOST_RUNNING_PER_APP {
        return Err(ApiError::Conflict(format!(
            "{running} background tasks are running ({in_app} of this application's): at most {MOST_RUNNING} at once, \
             {MOST_RUNNING_PER_APP} per application; wait for one to end"
        )));
    }
    Ok(())
}

/// Starts a task of the application (a content purge) under the same caps as a
/// replay; 202 with its `ReplayOut`, kept under the request's Idempotency-Key
/// (a retry does not start a second one).
pub(super) async fn start_app_task(
    state: &AppState,
    tenant: &TenantAuth,
    app: &AppId,
    kind: TaskKind,
    key: Option<&RequestKey>,
) -> Result<HttpResponse, ApiError> {
    debug_assert_eq!(kind, TaskKind::PurgeContent);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    room_for_a_task(&tx, &tenant.0, app).await?;
    let task = tasks::create_purge(&*tx, &tenant.0, app).await?;
    let res = answer(&*tx, state, key, StatusCode::ACCEPTED, &task_started(&task)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(task = %task.id, kind = task.kind.name(), app = %app, "background task started");
    Ok(res)
}

/// A background task without its data, as every route that starts one answers
/// it: replays, recovery, purges, aggregations, statistics, broadcasts (Svix's
/// `ReplayOut`, `RecoverOut`, `ExpungeAllContentsOut`, `AggregateEventTypesOut`:
/// one shape, named in the OpenAPI document by the first, as before).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ReplayOut)]
pub(super) struct TaskStarted {
    pub(super) id: TaskId,
    /// `running`, `finished` or `failed`.
    #[schema(example = "running")]
    pub(super) status: &'static str,
    /// What the task does: `endpoint.replay`, `endpoint.bulk-replay`, `endpoint.recover`,
    /// `application.purge_content`, `application.stats`, `event-type.aggregate` or `message.broadcast`.
    #[schema(example = "endpoint.replay")]
    pub(super) task: &'static str,
    pub(super) updated_at: DateTime<Utc>,
}

/// The task without its data.
pub(super) fn task_started(t: &Task) -> TaskStarted {
    TaskStarted { id: t.id.clone(), status: t.status.name(), task: t.kind.name(), updated_at: t.updated_at }
}

/// A background task with what it did (Svix's `BackgroundTaskOut`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct BackgroundTaskOut {
    data: TaskData,
    id: TaskId,
    /// `running`, `finished` or `failed`.
    #[schema(example = "finished")]
    status: &'static str,
    /// What the task does, as in `ReplayOut`.
    #[schema(example = "endpoint.replay")]
    task: &'static str,
    updated_at: DateTime<Utc>,
}

/// A background task's `data`, by its kind.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = BackgroundTaskData)]
enum TaskData {
    /// A replay's or a recovery's.
    #[serde(rename_all = "camelCase")]
    Replay {
        app_id: Option<AppId>,
        endpoint_id: Option<EndpointId>,
        /// Why the task failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<String>,
        /// Deliveries the task made due.
        messages_sent: i64,
    },
    /// A content purge's.
    #[serde(rename_all = "camelCase")]
    Purge {
        app_id: Option<AppId>,
        /// Why the task failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<String>,
        /// Payloads the task erased.
        messages_purged: i64,
    },
    /// Applications' deliveries in a window (`application.stats`).
    #[serde(rename_all = "camelCase")]
    AppStats {
        app_stats: Vec<AppUsage>,
        /// Why the task failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<String>,
    },
    /// A broadcast's (`message.broadcast`).
    #[serde(rename_all = "camelCase")]
    Broadcast {
        /// Why the task failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<String>,
        /// Applications the message was published to.
        messages_sent: i64,
    },
    /// The tenant's event types as an OpenAPI document's `webhooks` (`sdk.generate`).
    Export {
        #[schema(value_type = Object)]
        openapi: Value,
    },
    /// The event types applications subscribe to (`event-type.aggregate`; the key
    /// is snake_case, as Svix's).
    EventTypes {
        event_types: Vec<AppEventTypes>,
        /// Why the task failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(nullable = false)]
        error: Option<String>,
    },
}

/// A list a statistics task stored under `key` (empty if it stored none).
fn stored<T: serde::de::DeserializeOwned>(data: &Option<Value>, key: &str) -> Vec<T> {
    let Some(found) = data.as_ref().and_then(|d| d.get(key)) else { return Vec::new() };
    serde_json::from_value(found.clone()).unwrap_or_else(|e| {
        // Written by this code, so never; should a later release store another shape,
        // the task still lists, with its data empty.
        tracing::warn!(error = %e, key, "a statistics task's stored data does not read back");
        Vec::new()
    })
}

/// The task with what it did.
fn task_out(t: &Task) -> BackgroundTaskOut {
    let error = t.failure.clone();
    let data = match t.kind {
        TaskKind::Replay | TaskKind::BulkReplay | TaskKind::Recover => TaskData::Replay {
            app_id: t.app_id.clone(),
            endpoint_id: t.endpoint_id.clone(),
            error,
            messages_sent: t.sent,
        },
        TaskKind::PurgeContent => TaskData::Purge { app_id: t.app_id.clone(), error, messages_purged: t.sent },
        TaskKind::AppStats => TaskData::AppStats { app_stats: stored(&t.data, "appStats"), error },
        TaskKind::EventTypeAggregate => TaskData::EventTypes { event_types: stored(&t.data, "event_types"), error },
        TaskKind::Broadcast => TaskData::Broadcast { error, messages_sent: t.sent },
        TaskKind::SdkGenerate => {
            TaskData::Export { openapi: t.data.as_ref().and_then(|d| d.get("openapi")).cloned().unwrap_or_default() }
        }
    };
    BackgroundTaskOut { data, id: t.id.clone(), status: t.status.name(), task: t.kind.name(), updated_at: t.updated_at }
}

/// `?status=&task=`, beside the page's `?limit=&iterator=&order=`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    status: Option<String>,
    task: Option<String>,
}

/// The tenant's background tasks, newest first unless `order=ascending`.
#[utoipa::path(params(ListQuery, PageQuery), tag = "Background Task", operation_id = "v1.background-task.list", responses((status = 200, body = Page<BackgroundTaskOut>)))]
#[get("/background-task")]
async fn list(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    q: web::Query<ListQuery>,
    page: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(
            TaskStatus::from_name(s)
                .ok_or_else(|| ApiError::Validation(format!("`status`: `{s}` is none of running, finished, failed")))?,
        ),
    };
    let kind = match q.task.as_deref() {
        None => None,
        Some(s) => Some(TaskKind::from_name(s).ok_or_else(|| {
            ApiError::Validation(format!(
                "`task`: `{s}` is none of endpoint.replay, endpoint.bulk-replay, endpoint.recover, \
                 application.purge_content, application.stats, event-type.aggregate, message.broadcast"
            ))
        })?),
    };
    let conn = db::conn(&state.db).await?;
    let page = tasks::list(&**conn, &tenant.0, status, kind, &page.page::<TaskId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(|t| task_out(&t))))
}

/// One background task, with what it did.
#[utoipa::path(tag = "Background Task", operation_id = "v1.background-task.get", responses((status = 200, body = BackgroundTaskOut)))]
#[get("/background-task/{task_id}")]
async fn get_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<TaskId>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let task = tasks::get(&**conn, &tenant.0, &path).await?.ok_or(ApiError::NotFound("background task"))?;
    Ok(HttpResponse::Ok().json(task_out(&task)))
}
