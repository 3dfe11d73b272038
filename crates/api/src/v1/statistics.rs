//! `v1.statistics`: messages sent per application in a window
//! (`aggregate_app_stats`) and the event types each application subscribes to
//! (`aggregate_event_types`). Svix runs them as background tasks; Hookgate
//! answers them in the request (one bounded statement each) and records the
//! task finished, so `background-task/{id}` reads the result as the SDK expects.

use actix_web::{post, put, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref},
    store::{applications, statistics, tasks},
    AppState,
};
use serde::Deserialize;
use serde_json::json;

use crate::KeyAuth;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(app_stats).service(event_types);
}

/// Applications a request may name.
const MOST_NAMED: usize = 1000;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AppUsageStatsIn {
    #[serde(deserialize_with = "crate::when::at")]
    since: DateTime<Utc>,
    #[serde(deserialize_with = "crate::when::at")]
    until: DateTime<Utc>,
    app_ids: Option<Vec<String>>,
}

/// `POST /stats/usage/app`: 202 with the task, finished; its `data.appStats`
/// counts per application the deliveries its messages of the window made.
/// Names that match no application are listed in `unresolvedAppIds`; when none
/// match, 422.
#[post("/stats/usage/app")]
async fn app_stats(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<AppUsageStatsIn>,
) -> Result<HttpResponse, ApiError> {
    if body.until <= body.since {
        return Err(ApiError::Validation(format!("`until` ({}) must be after `since` ({})", body.until, body.since)));
    }
    let conn = db::conn(&state.db).await?;
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
    let mut out = super::tasks::replay_out(&task);
    out["unresolvedAppIds"] = json!(unresolved);
    Ok(HttpResponse::Accepted().json(out))
}

/// `PUT /stats/usage/event-types`: 202 with the task, finished; its
/// `data.event_types` lists per application the event types its endpoints name
/// and whether one takes every type.
#[put("/stats/usage/event-types")]
async fn event_types(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let data = json!({ "event_types": statistics::subscribed_event_types(&**conn, &key.0).await? });
    let now = Utc::now();
    let task = tasks::create_finished(&**conn, &key.0, tasks::TaskKind::EventTypeAggregate, (now, now), &data).await?;
    Ok(HttpResponse::Accepted().json(super::tasks::replay_out(&task)))
}
