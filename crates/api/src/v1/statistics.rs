//! `v1.statistics`: messages sent per application in a window
//! (`aggregate_app_stats`) and the event types each application subscribes to
//! (`aggregate_event_types`). Svix runs them as background tasks; Hookgate
//! answers them in the request (one bounded statement each) and records the
//! task finished, so `background-task/{id}` reads the result as the SDK expects.

use actix_web::{http::StatusCode, post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref, TaskId},
    store::{applications, statistics, tasks},
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::tasks::TaskStarted;
use crate::idempotency::{answer, RequestKey};
use crate::KeyAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(app_stats).service(event_types);
}

/// Applications a request may name.
const MOST_NAMED: usize = 1000;
/// The longest window `aggregate_app_stats` counts.
const LONGEST_WINDOW_DAYS: i64 = 31;
/// Statistics tasks of each kind a tenant may start an hour: each is a heavy
/// statement, and its result is kept as long as tasks are.
const MOST_AN_HOUR: usize = 30;

/// 429 once the tenant started [`MOST_AN_HOUR`] tasks of `kind` in the last hour.
/// The count is not locked: a burst of requests at once may pass it by a few,
/// which bounds the rate well enough without holding the tenant's row for the
/// length of a statistics statement.
pub(super) async fn within_rate(
    db: &impl tokio_postgres::GenericClient,
    tenant: &hookgate_shared::ids::TenantId,
    kind: tasks::TaskKind,
) -> Result<(), ApiError> {
    let leaving = tasks::leaving_the_hour(db, tenant, kind).await?;
    // Room for one more once only `MOST_AN_HOUR - 1` are left in the hour: when the
    // task at `len - MOST_AN_HOUR`, oldest first, leaves it (a burst may have slipped
    // a few past the count, so not always the oldest).
    if leaving.len() >= MOST_AN_HOUR {
        return Err(ApiError::RateLimited {
            detail: format!("at most {MOST_AN_HOUR} `{}` tasks an hour; read the last one's result", kind.name()),
            retry_after_secs: leaving[leaving.len() - MOST_AN_HOUR] as u64,
        });
    }
    Ok(())
}

/// The window to count, and the applications (ids or uids; absent: all).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AppUsageStatsIn {
    #[serde(deserialize_with = "crate::when::at")]
    since: DateTime<Utc>,
    #[serde(deserialize_with = "crate::when::at")]
    until: DateTime<Utc>,
    app_ids: Option<Vec<String>>,
}

/// The finished task (Svix's `AppUsageStatsOut`), and the names that matched no application.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppUsageStatsOut {
    id: TaskId,
    /// Always `finished`.
    status: &'static str,
    /// Always `application.stats`.
    task: &'static str,
    /// The `appIds` that name no application of the tenant.
    unresolved_app_ids: Vec<String>,
    updated_at: DateTime<Utc>,
}

/// `POST /stats/usage/app`: 202 with the task, finished; its `data.appStats`
/// counts per application the deliveries its messages of the window made.
/// Names that match no application are listed in `unresolvedAppIds`; when none
/// match, 422.
#[utoipa::path(tag = "Statistics", operation_id = "v1.statistics.aggregate-app-stats", responses((status = 202, body = AppUsageStatsOut)))]
#[post("/stats/usage/app")]
async fn app_stats(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<AppUsageStatsIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    if body.until <= body.since {
        return Err(ApiError::Validation(format!("`until` ({}) must be after `since` ({})", body.until, body.since)));
    }
    if body.until - body.since > chrono::Duration::days(LONGEST_WINDOW_DAYS) {
        return Err(ApiError::Validation(format!("`since` to `until`: at most {LONGEST_WINDOW_DAYS} days")));
    }
    let conn = db::conn(&state.db).await?;
    within_rate(&**conn, &key.0, tasks::TaskKind::AppStats).await?;
    let (apps, unresolved) = match &body.app_ids {
        None => (None, Vec::new()),
        Some(names) if names.len() > MOST_NAMED => {
            return Err(ApiError::Validation(format!("`appIds`: at most {MOST_NAMED}")))
        }
        Some(names) => {
            let mut found: Vec<AppId> = Vec::new();
            let mut unresolved = Vec::new();
            for name in names {
                let app = match Ref::<AppId>::parse(name) {
                    Ok(r) => applications::get(&**conn, &key.0, &r).await?,
                    Err(_) => None,
                };
                match app {
                    Some(a) if !found.contains(&a.id) => found.push(a.id),
                    Some(_) => {}
                    None => unresolved.push(name.clone()),
                }
            }
            if found.is_empty() {
                return Err(ApiError::Validation("`appIds`: none of them names an application".into()));
            }
            (Some(found), unresolved)
        }
    };
    let stats = statistics::app_usage(&**conn, &key.0, apps.as_deref(), body.since, body.until).await?;
    let data = json!({ "appStats": stats });
    let task =
        tasks::create_finished(&**conn, &key.0, tasks::TaskKind::AppStats, (body.since, body.until), &data).await?;
    let TaskStarted { id, status, task, updated_at } = super::tasks::task_started(&task);
    let out = AppUsageStatsOut { id, status, task, unresolved_app_ids: unresolved, updated_at };
    answer(&**conn, &state, request.as_deref(), StatusCode::ACCEPTED, &out).await
}

/// `PUT /stats/usage/event-types`: 202 with the task, finished; its
/// `data.event_types` lists per application the event types its endpoints name
/// and whether one takes every type.
#[utoipa::path(tag = "Statistics", operation_id = "v1.statistics.aggregate-event-types", responses((status = 202, body = TaskStarted)))]
#[put("/stats/usage/event-types")]
async fn event_types(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    within_rate(&**conn, &key.0, tasks::TaskKind::EventTypeAggregate).await?;
    let data = json!({ "event_types": statistics::subscribed_event_types(&**conn, &key.0).await? });
    let now = Utc::now();
    let task = tasks::create_finished(&**conn, &key.0, tasks::TaskKind::EventTypeAggregate, (now, now), &data).await?;
    Ok(HttpResponse::Accepted().json(super::tasks::task_started(&task)))
}
