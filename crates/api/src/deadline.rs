//! The API's bound on a request: a stalled Postgres answers 503 within the
//! database budget instead of holding the caller (and a connection) forever.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web, Error,
};
use hookgate_shared::{http::ApiError, AppState};

/// Innermost in the API's scopes: it bounds the handler, and the
/// `Idempotency-Key` middleware around it sees the 503 and releases the key.
/// Handlers only wait on Postgres, except the replay of a sync-mode event, which
/// also forwards it and so may take the egress timeout on top, and a test
/// attempt, which waits for its attempt.
///
/// A request cut off here may still commit when Postgres resumes (a group
/// commit already sent, say): its effect then stands although the client was
/// told 503. Its retry is safe under an `Idempotency-Key` (the answer commits
/// with the effect, so the retry replays it) or, for a message, an `eventId`.
pub async fn deadline(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned().expect("AppState is registered on the app");
    let mut limit = state.db_budget();
    if req.path().ends_with("/replay") {
        limit += state.config.egress_timeout;
    }
    // A test attempt waits for its attempt: the egress timeout and two seconds
    // (`v1::endpoint::msgs`), within this.
    if req.path().ends_with("/msg/test-attempt") {
        limit += state.config.egress_timeout + std::time::Duration::from_secs(5);
    }
    // The request cannot be kept aside to answer with: routing inside the scope
    // needs it unshared. The error is answered by actix (the same `{code, detail}`
    // body) and counted by the telemetry middleware.
    match tokio::time::timeout(limit, next.call(req)).await {
        Ok(res) => Ok(res?.map_into_boxed_body()),
        Err(_) => {
            // Inside the request's span, which names the route (never the path).
            tracing::warn!(?limit, "request timed out waiting for Postgres");
            // The connection it held may be one that will never answer.
            hookgate_shared::db::note_stall();
            Err(ApiError::Unavailable.into())
        }
    }
}
