//! Tenants' quotas at the API's edge: the `apiRequestsPerSecond` middleware, the
//! message rate and daily cap, and the application cap, each answered as a 4xx
//! that names the limit.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web, Error, HttpMessage,
};
use chrono::NaiveDate;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, TenantId},
    limits,
    quota::{Exceeded, Limit},
    store::{
        applications::{self, Application, ApplicationFields},
        usage,
    },
    AppState,
};

use crate::{auth::reject, Principal};

/// Admits the request within its tenant's `apiRequestsPerSecond`, or answers 429
/// with `Retry-After`. Runs after authentication; the operator has no quota.
pub async fn limit_api(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let tenant = match req.extensions().get::<Principal>() {
        Some(Principal::Tenant { tenant, .. }) | Some(Principal::Portal { tenant, .. }) => Some(tenant.clone()),
        _ => None,
    };
    if let Some(tenant) = tenant {
        let state = req.app_data::<web::Data<AppState>>().cloned().expect("AppState is registered on the app");
        // App-portal links share a bucket of their own (one per tenant, however
        // many links it mints): its customers looping in the portal must not
        // spend the tenant's own API rate.
        // A message token is the tenant's own publishing service: its rate is the
        // tenant's. A poller token is a customer's, as a portal link is.
        let bucket = match req.extensions().get::<Principal>() {
            Some(Principal::Portal { message_only: false, .. }) => "portal",
            _ => "api",
        };
        let checked = match limits::quotas(&state, &tenant).await {
            Ok(q) => {
                limits::rate_in(&state, &tenant, &q, Limit::ApiRequestsPerSecond, bucket).await.map_err(ApiError::Quota)
            }
            Err(e) => Err(e.into()),
        };
        if let Err(e) = checked {
            return reject(req, e);
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The day's place a message holds under `messagesPerDay`, to give back if it is
/// surely not created.
pub struct Reservation {
    day: NaiveDate,
}

/// One message more for the tenant: within `messagesPerSecond`, then within
/// `messagesPerDay` (reserved in Postgres, exact across instances). `Some` when a
/// place was reserved: the caller gives it back with [`message_not_created`]
/// when the message surely was not created.
pub async fn admit_message(state: &AppState, tenant: &TenantId) -> Result<Option<Reservation>, ApiError> {
    let quotas = limits::quotas(state, tenant).await?;
    limits::rate(state, tenant, &quotas, Limit::MessagesPerSecond).await.map_err(ApiError::Quota)?;
    let Some(cap) = quotas.limit(Limit::MessagesPerDay) else { return Ok(None) };
    let reserved = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        usage::reserve_messages(&**conn, tenant, cap as i64, 1).await
    })
    .await?;
    match reserved {
        Some(day) => Ok(Some(Reservation { day })),
        None => {
            let e = limits::refused(state, tenant, Exceeded::until_tomorrow(Limit::MessagesPerDay, cap));
            Err(ApiError::Quota(e))
        }
    }
}

/// Gives back the reservation of a message that surely was not created (a
/// conflict, an unknown application, bad input): only what exists counts. Never
/// after an error whose outcome is unknown (a timeout may have committed), so the
/// cap errs towards fewer messages, never more.
pub async fn message_not_created(state: &AppState, tenant: &TenantId, reservation: Reservation) {
    let released = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        usage::release_messages(&**conn, tenant, reservation.day, 1).await
    })
    .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, tenant = %tenant, "a daily message reservation was not given back");
    }
}

/// The tenant's `appsPerTenant`, for [`applications::insert_capped`].
pub async fn app_cap(state: &AppState, tenant: &TenantId) -> Result<Option<u64>, ApiError> {
    Ok(limits::quotas(state, tenant).await?.limit(Limit::AppsPerTenant))
}

/// Creates an application within the tenant's `appsPerTenant`, in the caller's
/// transaction; over it, 422 naming the quota.
pub async fn insert_app(
    state: &AppState,
    tx: &impl tokio_postgres::GenericClient,
    tenant: &TenantId,
    fields: &ApplicationFields,
    cap: Option<u64>,
) -> Result<Application, ApiError> {
    match applications::insert_capped(tx, tenant, &AppId::generate(), fields, cap).await? {
        Ok(app) => Ok(app),
        Err(n) => {
            let value = cap.unwrap_or_default();
            limits::refused(
                state,
                tenant,
                Exceeded { limit: Limit::AppsPerTenant, value, retry_after: Default::default() },
            );
            Err(ApiError::Validation(hookgate_shared::quota::apps_full(n, value)))
        }
    }
}
