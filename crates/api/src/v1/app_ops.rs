//! Svix's operations on an application beyond CRUD: its alert e-mail, its
//! attempts' statistics (two shapes), an endpoint's throttling status, and the
//! tenant's event types exported as an OpenAPI document.

use std::collections::BTreeMap;

use actix_web::{get, http::StatusCode, patch, post, web, HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, DurationRound, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    store::{applications, destination_ops, event_types, page::PageRequest, statistics, tasks},
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{applications::find as find_app, endpoints::find_any, tasks::ReplayOut};
use crate::idempotency::{answer, RequestKey};
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(alert_email)
        .service(app_attempt_stats)
        .service(attempt_statistics)
        .service(throttling_status)
        .service(export_openapi);
}

/// Addresses an alert e-mail may name, at most.
const MOST_ADDRESSES: usize = 20;
/// The longest window attempt statistics count.
const LONGEST_WINDOW_DAYS: i64 = 31;
/// Periods an `AttemptStatisticsResponse` holds at most.
const MOST_PERIODS: i64 = 1000;
/// Event types an export holds at most (as an environment export).
const MOST_EXPORTED: usize = 10_000;

/// Svix's `AlertEmailPatch`: comma-separated addresses; `null` or empty clears them.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(as = AlertEmailPatch)]
struct AlertEmailIn {
    email: Option<String>,
}

/// Each comma-separated address checked for the shape `local@domain`: no
/// spaces or controls, at most 254 characters, at most [`MOST_ADDRESSES`].
fn addresses(raw: &str) -> Result<Option<String>, ApiError> {
    let list: Vec<&str> = raw.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
    if list.len() > MOST_ADDRESSES {
        return Err(ApiError::Validation(format!("`email`: at most {MOST_ADDRESSES} addresses")));
    }
    for a in &list {
        let ok = a.len() <= 254
            && !a.chars().any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
            && matches!(a.split_once('@'), Some((local, domain)) if !local.is_empty() && domain.contains('.')
                && !domain.contains('@') && !domain.starts_with('.') && !domain.ends_with('.'));
        if !ok {
            let shown: String = a.chars().take(64).collect();
            return Err(ApiError::Validation(format!("`email`: `{shown}` is not an e-mail address")));
        }
    }
    Ok((!list.is_empty()).then(|| list.join(", ")))
}

/// Sets the addresses the application's alerts go to (204). Stored only:
/// Hookgate sends no e-mail (it has no SMTP setting); operational webhooks
/// (`endpoint.disabled`, `message.attempt.exhausted`, …) carry the same events.
#[utoipa::path(tag = "Application", operation_id = "v1.application.patch-alert-email", responses((status = 204, description = "stored")))]
#[patch("/app/{app_id}/alert-email")]
async fn alert_email(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<AlertEmailIn>,
) -> Result<HttpResponse, ApiError> {
    let email = body.email.as_deref().map(addresses).transpose()?.flatten();
    let app = find_app(&state, &TenantAuth(key.0.clone()), &path).await?;
    let conn = db::conn(&state.db).await?;
    if !applications::set_alert_email(&**conn, &key.0, &app.id, email.as_deref()).await? {
        return Err(ApiError::NotFound("application"));
    }
    Ok(HttpResponse::NoContent().finish())
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

/// Svix's `EndpointRateLimitStatus`.
#[derive(Serialize, ToSchema)]
enum EndpointRateLimitStatus {
    Ok,
    RateLimited,
}

/// Svix's `EndpointThrottleRateStatusOut`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointThrottleRateStatusOut {
    status: EndpointRateLimitStatus,
    /// Since when the oldest delivery held back has been due, while throttled.
    throttled_since: Option<DateTime<Utc>>,
}

/// `RateLimited` while the endpoint's `throttleRate` (or its application's)
/// holds deliveries back: more are due now than it sends in a second.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-throttling-status", responses((status = 200, body = EndpointThrottleRateStatusOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/rate-limit-status")]
async fn throttling_status(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find_any(&state, &tenant, &path.0, &path.1).await?;
    let rate = match ep.throttle_rate {
        Some(r) => Some(r),
        None => find_app(&state, &tenant, &Ref::Id(app.clone())).await?.throttle_rate,
    };
    let out = match rate.filter(|r| *r > 0) {
        None => EndpointThrottleRateStatusOut { status: EndpointRateLimitStatus::Ok, throttled_since: None },
        Some(rate) => {
            let conn = db::conn(&state.db).await?;
            let (due, oldest) =
                destination_ops::due_backlog(&**conn, &tenant.0, &app, &ep.id, i64::from(rate) + 1).await?;
            match due > i64::from(rate) {
                true => EndpointThrottleRateStatusOut {
                    status: EndpointRateLimitStatus::RateLimited,
                    throttled_since: oldest,
                },
                false => EndpointThrottleRateStatusOut { status: EndpointRateLimitStatus::Ok, throttled_since: None },
            }
        }
    };
    Ok(HttpResponse::Ok().json(out))
}

/// The tenant's live event types as an OpenAPI 3.1 document: one `webhooks`
/// entry per type, its schema version "1" (else the highest) as the body.
fn document(types: Vec<event_types::EventType>) -> Value {
    let mut webhooks = Map::new();
    for t in types.into_iter().filter(|t| !t.archived) {
        let schemas = t.schemas.as_ref().and_then(Value::as_object);
        let schema = schemas
            .and_then(|s| {
                s.get("1").or_else(|| s.iter().max_by_key(|(k, _)| k.parse::<u64>().unwrap_or(0)).map(|(_, v)| v))
            })
            .cloned();
        let mut op = json!({
            "operationId": t.name,
            "description": t.description,
            "requestBody": {"content": {"application/json": {"schema": schema.unwrap_or_else(|| json!({}))}}},
            "responses": {"2XX": {"description": "Return any 2XX status to indicate that the data was received successfully"}},
        });
        if t.deprecated {
            op["deprecated"] = json!(true);
        }
        webhooks.insert(t.name, json!({ "post": op }));
    }
    json!({"openapi": "3.1.0", "info": {"title": "Webhooks", "version": "1.0.0"}, "paths": {}, "webhooks": webhooks})
}

/// Svix's `ExportEventTypeOut`: the task, finished at once; the document is its
/// `data.openapi` (`GET /api/v1/background-task/{id}`).
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.export-openapi", responses((status = 202, body = ReplayOut)))]
#[post("/event-type/export/openapi")]
async fn export_openapi(
    key: KeyAuth,
    state: web::Data<AppState>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    super::statistics::within_rate(&**conn, &key.0, tasks::TaskKind::SdkGenerate).await?;
    let mut types = Vec::new();
    let mut page = PageRequest::new(Some(250), None);
    loop {
        let got = event_types::list(&**conn, &key.0, &page, false, None).await?;
        let next = got.iterator.clone();
        types.extend(got.data);
        if types.len() > MOST_EXPORTED {
            return Err(ApiError::Conflict(format!("the tenant has more than {MOST_EXPORTED} event types to export")));
        }
        match next.filter(|_| !got.done) {
            Some(after) => page = PageRequest::following(250, Some(after)),
            None => break,
        }
    }
    let now = Utc::now();
    let data = json!({ "openapi": document(types) });
    let task = tasks::create_finished(&**conn, &key.0, tasks::TaskKind::SdkGenerate, (now, now), &data).await?;
    answer(&**conn, &state, request.as_deref(), StatusCode::ACCEPTED, &super::tasks::replay_out(&task)).await
}
