//! An endpoint's activity for the portal and Svix's stats: its deliveries by status
//! (`v1.endpoint.get-stats`), attempts per hour (the delivery chart) and `attempt-stats`.

use actix_web::{get, web, HttpResponse};
use chrono::{DateTime, Duration, DurationRound, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    status::{DeliveryStatus, EndpointKind},
    store::{attempts, deliveries},
    AppState,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::crud::find_any as find;
use crate::{when::Window, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(stats).service(hourly).service(attempt_stats);
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// An endpoint's deliveries (a FIFO endpoint's messages) by status.
#[derive(Serialize, ToSchema)]
struct EndpointStats {
    canceled: i64,
    fail: i64,
    pending: i64,
    sending: i64,
    success: i64,
}

/// The window a query asks for: the last 24 hours unless `since`/`until` say
/// otherwise, at most 31 days.
fn window(q: &Window) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let until = q.until.unwrap_or_else(Utc::now);
    let since = q.since.unwrap_or_else(|| until - Duration::hours(24));
    if since >= until || until - since > Duration::days(31) {
        return Err(ApiError::Validation("`since` must be before `until`, at most 31 days apart".into()));
    }
    Ok((since, until))
}

/// The endpoint's attempts per hour in a window.
#[derive(Serialize, ToSchema)]
struct EndpointHourlyStatsOut {
    /// Hours without attempts are left out; oldest first.
    data: Vec<EndpointHourOut>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// One hour's attempts: those that succeeded and those that failed.
#[derive(Serialize, ToSchema)]
struct EndpointHourOut {
    fail: i64,
    hour: DateTime<Utc>,
    success: i64,
}

/// The endpoint's attempts in a window, and its deliveries a transformation canceled.
#[derive(Serialize, ToSchema)]
struct EndpointAttemptStatsOut {
    canceled: i64,
    fail: i64,
    success: i64,
}

/// `GET …/endpoint/{id}/stats/hourly`: successes and failures per hour, the last
/// 24 hours unless `since`/`until` say otherwise (at most 31 days).
#[utoipa::path(params(Window), tag = "Endpoint", operation_id = "hookgate.endpoint.hourly-stats", responses((status = 200, body = EndpointHourlyStatsOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/stats/hourly")]
async fn hourly(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    q: web::Query<Window>,
) -> Result<HttpResponse, ApiError> {
    let (since, until) = window(&q)?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let hours = state.read(async |c| attempts::hourly(c, &tenant.0, &app, &ep.id, since, until).await).await?;
    let data = hours.into_iter().map(|h| EndpointHourOut { fail: h.fail, hour: h.hour, success: h.success }).collect();
    Ok(HttpResponse::Ok().json(EndpointHourlyStatsOut { data, since, until }))
}

/// `GET …/endpoint/{id}/attempt-stats` (Svix's `get_attempt_stats`): the
/// endpoint's attempts that succeeded and failed in the window, rounded out to
/// whole hours (the last 24 unless `since`/`until` say otherwise, at most 31
/// days); `canceled`, its deliveries of messages of the window that a
/// transformation canceled (they make no attempt).
#[utoipa::path(params(Window), tag = "Endpoint", operation_id = "hookgate.endpoint.attempt-stats", responses((status = 200, body = EndpointAttemptStatsOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/attempt-stats")]
async fn attempt_stats(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    q: web::Query<Window>,
) -> Result<HttpResponse, ApiError> {
    let (since, until) = window(&q)?;
    let hour = |t: DateTime<Utc>| t.duration_trunc(Duration::hours(1)).unwrap_or(t);
    let (since, until) = (hour(since), hour(until - Duration::nanoseconds(1)) + Duration::hours(1));
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let (hours, canceled) = state
        .read(async |c| {
            let hours = attempts::hourly(c, &tenant.0, &app, &ep.id, since, until).await?;
            Ok((hours, attempts::canceled(c, &tenant.0, &app, &ep.id, since, until).await?))
        })
        .await?;
    let (success, fail) = hours.iter().fold((0, 0), |(s, f), h| (s + h.success, f + h.fail));
    Ok(HttpResponse::Ok().json(EndpointAttemptStatsOut { canceled, fail, success }))
}

/// The endpoint's (or a destination's) deliveries by status, within `since` and `until`.
#[utoipa::path(params(Window), tag = "Endpoint", operation_id = "v1.endpoint.get-stats", responses((status = 200, body = EndpointStats)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/stats")]
async fn stats(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    q: web::Query<Window>,
) -> Result<HttpResponse, ApiError> {
    // A destination's too (its deliveries are counted alike).
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    // A FIFO endpoint sends batches and makes no deliveries: its messages are
    // counted by their attempts (one per message of each batch) instead.
    // Within 31 days (the last 31 unless `since` says otherwise): each retry
    // adds an attempt per message of its batch.
    if ep.kind == EndpointKind::FifoEndpoint {
        let until = q.until.unwrap_or_else(chrono::Utc::now);
        let since = q.since.unwrap_or(until - chrono::Duration::days(31));
        if since >= until || until - since > chrono::Duration::days(31) {
            return Err(ApiError::Validation(
                "a FIFO endpoint's stats: `since` must be before `until`, at most 31 days apart".into(),
            ));
        }
        let (success, fail) = attempts::per_message(&**conn, &tenant.0, &app, &ep.id, Some(since), Some(until)).await?;
        return Ok(HttpResponse::Ok().json(EndpointStats { canceled: 0, fail, pending: 0, sending: 0, success }));
    }
    let counts = deliveries::stats(&**conn, &tenant.0, &app, &ep.id, q.since, q.until).await?;
    let n = |s| counts.get(&s).copied().unwrap_or(0);
    Ok(HttpResponse::Ok().json(EndpointStats {
        canceled: n(DeliveryStatus::Canceled),
        fail: n(DeliveryStatus::Failed),
        pending: n(DeliveryStatus::Pending),
        sending: n(DeliveryStatus::Sending),
        success: n(DeliveryStatus::Success),
    }))
}
