//! `v1.event-type.{get,set}-retry-schedule`: an event type's own delays between
//! delivery attempts, in place of the operator's `HOOKGATE_RETRY_SCHEDULE`.

use actix_web::{get, put, web, HttpResponse};
use hookgate_shared::{db, http::ApiError, store::type_schedules, AppState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{path::EventTypeName, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_schedule).service(set_schedule);
}

/// The most delays a schedule may hold, and the bounds of each: at least a
/// second (a schedule of zeros would send a burst), at most a week.
const MOST_DELAYS: usize = 50;
const LEAST_MS: i64 = 1_000;
const MOST_MS: i64 = 7 * 86_400_000;
/// The whole schedule: a delivery ends within 30 days of its first attempt, well
/// inside the shortest retention that keeps its message (90 days by default).
const MOST_TOTAL_MS: i64 = 30 * 86_400_000;

/// A delay, as Svix writes one: whole seconds and nanoseconds.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy)]
#[schema(as = Duration)]
struct Delay {
    secs: u64,
    nanos: u32,
}

/// The schedule; `null` (or none) keeps the operator's default.
#[derive(Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schema(as = RetryScheduleInOut)]
struct ScheduleInOut {
    #[serde(default)]
    retry_schedule: Option<Vec<Delay>>,
}

impl ScheduleInOut {
    fn of_ms(ms: Option<Vec<i64>>) -> Self {
        let delay = |ms: i64| Delay { secs: (ms / 1000) as u64, nanos: ((ms % 1000) * 1_000_000) as u32 };
        ScheduleInOut { retry_schedule: ms.map(|v| v.into_iter().map(delay).collect()) }
    }

    /// The delays in milliseconds, checked.
    fn to_ms(&self) -> Result<Option<Vec<i64>>, ApiError> {
        let Some(delays) = &self.retry_schedule else { return Ok(None) };
        if delays.len() > MOST_DELAYS {
            return Err(ApiError::Validation(format!("`retrySchedule` holds at most {MOST_DELAYS} delays")));
        }
        let mut ms = Vec::with_capacity(delays.len());
        for d in delays {
            let total = i64::try_from(d.secs)
                .ok()
                .and_then(|s| s.checked_mul(1000))
                .and_then(|s| s.checked_add(i64::from(d.nanos / 1_000_000)));
            match total {
                Some(t) if (LEAST_MS..=MOST_MS).contains(&t) && d.nanos < 1_000_000_000 => ms.push(t),
                _ => {
                    return Err(ApiError::Validation("each delay of `retrySchedule` must be 1 second to 7 days".into()))
                }
            }
        }
        if ms.iter().sum::<i64>() > MOST_TOTAL_MS {
            return Err(ApiError::Validation("the delays of `retrySchedule` must add up to at most 30 days".into()));
        }
        Ok(Some(ms))
    }
}

/// The type's schedule: `retrySchedule: null` while it keeps the default.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.get-retry-schedule", responses((status = 200, body = ScheduleInOut)))]
#[get("/event-type/{event_type_name}/retry-schedule")]
async fn get_schedule(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let ms = type_schedules::get(&**conn, &tenant.0, &name).await?.ok_or(ApiError::NotFound("event type"))?;
    Ok(HttpResponse::Ok().json(ScheduleInOut::of_ms(ms)))
}

/// Sets the delays between attempts for messages of this type, from the next
/// failed attempt on (workers read a changed schedule within 30 seconds); `null`
/// goes back to the default. The first attempt is never delayed.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.update-retry-schedule", responses((status = 200, body = ScheduleInOut)))]
#[put("/event-type/{event_type_name}/retry-schedule")]
async fn set_schedule(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    name: web::Path<EventTypeName>,
    body: web::Json<ScheduleInOut>,
) -> Result<HttpResponse, ApiError> {
    let ms = body.to_ms()?;
    let conn = db::conn(&state.db).await?;
    if !type_schedules::set(&**conn, &tenant.0, &name, ms.as_deref()).await? {
        return Err(ApiError::NotFound("event type"));
    }
    Ok(HttpResponse::Ok().json(ScheduleInOut::of_ms(ms)))
}

#[cfg(test)]
mod tests {
    use super::{Delay, ScheduleInOut};

    fn of(delays: &[(u64, u32)]) -> ScheduleInOut {
        ScheduleInOut { retry_schedule: Some(delays.iter().map(|&(secs, nanos)| Delay { secs, nanos }).collect()) }
    }

    #[test]
    fn a_schedule_is_kept_in_milliseconds_and_out_of_bounds_delays_are_refused() {
        assert_eq!(of(&[(1, 0), (2, 500_000_000)]).to_ms().unwrap(), Some(vec![1000, 2500]));
        assert_eq!(ScheduleInOut::default().to_ms().unwrap(), None);
        for bad in [&[(0, 0)][..], &[(0, 999_000_000)], &[(8 * 86_400, 0)], &[(u64::MAX, 0)], &[(1, 2_000_000_000)]] {
            assert!(of(bad).to_ms().is_err(), "{:?}", bad);
        }
        assert!(of(&[(1, 0); 51]).to_ms().is_err());
        assert!(of(&[(9_223_372_036_854_775, 808_000_000)]).to_ms().is_err(), "no overflow");
        assert!(of(&[(6 * 86_400, 0); 6]).to_ms().is_err(), "36 days in all");
        let back = ScheduleInOut::of_ms(Some(vec![2500]));
        let d = back.retry_schedule.unwrap()[0];
        assert_eq!((d.secs, d.nanos), (2, 500_000_000));
    }
}
