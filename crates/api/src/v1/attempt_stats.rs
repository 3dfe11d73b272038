//! Svix's attempt statistics of an application, in two shapes: by outcome
//! and event type (`…/app/{app}/stats/attempts`), and by outcome per period
//! (`…/stats/app/{app}/attempt`). Rate-limited per tenant: each reads every
//! attempt of its window (see `statistics::app_attempts` for what that costs).

use std::collections::BTreeMap;

use actix_web::{get, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, DurationRound, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref},
    store::statistics,
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::applications::find as find_app;
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(app_attempt_stats).service(attempt_statistics);
}
/// The longest window attempt statistics count.
const LONGEST_WINDOW_DAYS: i64 = 31;
/// Periods an `AttemptStatisticsResponse` holds at most.
const MOST_PERIODS: i64 = 1000;
/// Attempt statistics a tenant may read a second (both routes together), a
/// burst of as many: each reads every attempt of its window (up to 31 days of
/// an application's, see `statistics::app_attempts`).
const STATS_PER_SEC: u64 = 2;

/// 429 once the tenant read [`STATS_PER_SEC`] attempt statistics this second.
async fn stats_within_rate(state: &AppState, tenant: &hookgate_shared::ids::TenantId) -> Result<(), ApiError> {
    match state.limits.own_rate(tenant, "attempt-stats", STATS_PER_SEC).await {
        None => Ok(()),
        Some(wait) => Err(ApiError::RateLimited {
            detail: format!("at most {STATS_PER_SEC} attempt statistics a second per tenant"),
            retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
        }),
    }
}

/// The query of both statistics routes; `event_types` may repeat or be comma-separated.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct AttemptStatsQuery {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    #[serde(rename = "startDate")]
    start_date: Option<DateTime<Utc>>,
    #[serde(rename = "endDate")]
    end_date: Option<DateTime<Utc>>,
    /// `OneDay` (the default), `OneHour` or `FiveMinutes`; `…/stats/app/{app}/attempt` only.
    period: Option<String>,
    event_types: Option<Vec<String>>,
}

/// The query read by hand (repeated keys are what serde's query reader refuses).
struct Asked {
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    period: Option<String>,
    event_types: Option<Vec<String>>,
}

fn asked(req: &HttpRequest, since_key: &str, until_key: &str) -> Result<Asked, ApiError> {
    let mut a = Asked { since: None, until: None, period: None, event_types: None };
    let time = |k: &str, v: &str| {
        DateTime::parse_from_rfc3339(v).map(|t| t.with_timezone(&Utc)).map_err(|_| {
            ApiError::Validation(format!("`{k}`: `{}` is not an RFC 3339 time", v.chars().take(40).collect::<String>()))
        })
    };
    for (k, v) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
        match k.as_ref() {
            k if k == since_key => a.since = Some(time(k, &v)?),
            k if k == until_key => a.until = Some(time(k, &v)?),
            "period" if since_key == "startDate" => a.period = Some(v.into_owned()),
            "event_types" | "event_types[]" => a
                .event_types
                .get_or_insert_with(Vec::new)
                .extend(v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)),
            other => {
                return Err(ApiError::Validation(format!(
                    "unknown query parameter `{}`",
                    other.chars().take(40).collect::<String>()
                )))
            }
        }
    }
    Ok(a)
}

/// `[since, until)`, defaulting to the `default` before `until` (now by default).
fn window(a: &Asked, default: Duration) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let until = a.until.unwrap_or_else(Utc::now);
    let since = a.since.unwrap_or(until - default);
    if since >= until {
        return Err(ApiError::Validation("the window's start must be before its end".into()));
    }
    if until - since > Duration::days(LONGEST_WINDOW_DAYS) {
        return Err(ApiError::Validation(format!("the window is at most {LONGEST_WINDOW_DAYS} days")));
    }
    Ok((since, until))
}

/// Svix's `AppAttemptEventTypeStats`.
#[derive(Serialize, ToSchema, Default)]
struct AppAttemptEventTypeStats {
    success: i64,
    failure: i64,
    canceled: i64,
}

/// Svix's `AppAttemptStatsOut` (snake_case, as Svix's).
#[derive(Serialize, ToSchema)]
struct AppAttemptStatsOut {
    by_event_type: BTreeMap<String, AppAttemptEventTypeStats>,
    total_success: i64,
    total_failure: i64,
    total_canceled: i64,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// The application's attempts in `[since, until)` (the last 24 hours by
/// default, at most 31 days) by outcome, in all and per event type.
#[utoipa::path(params(AttemptStatsQuery), tag = "Application", operation_id = "v1.application.stats.attempts", responses((status = 200, body = AppAttemptStatsOut)))]
#[get("/app/{app_id}/stats/attempts")]
async fn app_attempt_stats(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
) -> Result<HttpResponse, ApiError> {
    let a = asked(&req, "since", "until")?;
    let (since, until) = window(&a, Duration::days(1))?;
    let app = find_app(&state, &TenantAuth(key.0.clone()), &path).await?;
    stats_within_rate(&state, &key.0).await?;
    let conn = db::conn(&state.db).await?;
    let counts =
        statistics::app_attempts(&**conn, &key.0, &app.id, (since, until), None, a.event_types.as_deref()).await?;
    let mut out = AppAttemptStatsOut {
        by_event_type: BTreeMap::new(),
        total_success: 0,
        total_failure: 0,
        total_canceled: 0,
        since,
        until,
    };
    for c in counts {
        let per = out.by_event_type.entry(c.event_type).or_default();
        match c.status {
            0 => (per.success += c.count, out.total_success += c.count),
            4 => (per.canceled += c.count, out.total_canceled += c.count),
            _ => (per.failure += c.count, out.total_failure += c.count),
        };
    }
    Ok(HttpResponse::Ok().json(out))
}

/// Svix's `AttemptStatisticsData`: counts per period, oldest first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AttemptStatisticsData {
    success_count: Vec<i64>,
    failure_count: Vec<i64>,
    canceled_count: Vec<i64>,
}

/// Svix's `AttemptStatisticsResponse`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AttemptStatisticsResponse {
    start_date: DateTime<Utc>,
    end_date: DateTime<Utc>,
    /// `OneDay`, `OneHour` or `FiveMinutes`.
    #[schema(example = "OneDay")]
    period: &'static str,
    data: AttemptStatisticsData,
}

/// The application's attempts by outcome per period (`OneDay` by default),
/// from `startDate` (rounded down to its period) to `endDate` (now by default;
/// 7 days before it by default, at most 31 days and 1,000 periods).
#[utoipa::path(params(AttemptStatsQuery), tag = "Statistics", operation_id = "v1.stats.app-attempts", responses((status = 200, body = AttemptStatisticsResponse)))]
#[get("/stats/app/{app_id}/attempt")]
async fn attempt_statistics(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
) -> Result<HttpResponse, ApiError> {
    let a = asked(&req, "startDate", "endDate")?;
    let (period, step) = match a.period.as_deref() {
        None | Some("OneDay") => ("OneDay", Duration::days(1)),
        Some("OneHour") => ("OneHour", Duration::hours(1)),
        Some("FiveMinutes") => ("FiveMinutes", Duration::minutes(5)),
        Some(p) => {
            return Err(ApiError::Validation(format!(
                "`period`: `{}` is none of `OneDay`, `OneHour`, `FiveMinutes`",
                p.chars().take(40).collect::<String>()
            )))
        }
    };
    let (since, until) = window(&a, Duration::days(7))?;
    let since = since.duration_trunc(step).map_err(|e| ApiError::Validation(format!("`startDate`: {e}")))?;
    let periods = ((until - since).num_seconds() + step.num_seconds() - 1) / step.num_seconds();
    if periods > MOST_PERIODS {
        return Err(ApiError::Validation(format!("at most {MOST_PERIODS} periods: choose a longer `period`")));
    }
    let app = find_app(&state, &TenantAuth(key.0.clone()), &path).await?;
    stats_within_rate(&state, &key.0).await?;
    let conn = db::conn(&state.db).await?;
    let counts = statistics::app_attempts(
        &**conn,
        &key.0,
        &app.id,
        (since, until),
        Some(step.num_seconds()),
        a.event_types.as_deref(),
    )
    .await?;
    let n = periods.max(1) as usize;
    let mut data =
        AttemptStatisticsData { success_count: vec![0; n], failure_count: vec![0; n], canceled_count: vec![0; n] };
    for c in counts {
        let i = (c.period.max(0) as usize).min(n - 1);
        match c.status {
            0 => data.success_count[i] += c.count,
            4 => data.canceled_count[i] += c.count,
            _ => data.failure_count[i] += c.count,
        }
    }
    Ok(HttpResponse::Ok().json(AttemptStatisticsResponse { start_date: since, end_date: until, period, data }))
}
