//! What every way of delivering one claimed row shares (an HTTP request here in
//! `prepare.rs`, a hand-over in `destined.rs`): the room the lease leaves for the
//! attempt, the envelope and its signed request, and the outcome it records.

use std::time::{Duration, Instant};

use chrono::Utc;
use hookgate_shared::{
    db,
    ids::AttemptId,
    status::{DeliveryStatus, Trigger},
    store::{
        deliveries::{AttemptRecord, Claimed, Outcome},
        operational::AttemptNotice,
        queues,
    },
};
use reqwest::header::HeaderMap;

use super::{
    schedule,
    send::{self, Request},
    Worker,
};
use crate::signing;

/// The span of one delivery attempt (a client span; a child of what the caller
/// makes its parent), while tracing is on. Never the URL: an endpoint's URL may carry a token.
pub(crate) fn attempt_span(msg: &str, endpoint: &str, attempt: i32) -> tracing::Span {
    hookgate_shared::otel_span!(
        "delivery.attempt",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        msg,
        endpoint,
        attempt,
        http.response.status_code = tracing::field::Empty,
        outcome = tracing::field::Empty,
    )
}

pub(super) fn untried(c: &Claimed) -> Outcome {
    Outcome {
        tenant_id: c.tenant_id.clone(),
        app_id: c.app_id.clone(),
        msg_id: c.msg_id.clone(),
        endpoint_id: c.endpoint_id.clone(),
        lease: c.lease,
        trigger: c.trigger,
        attempt: None,
        status: DeliveryStatus::Failed,
        next_attempt_at: None,
        disable_endpoint: false,
        notice: None,
    }
}

/// Not attempted now: due again after `wait`, its attempts and trigger as they were.
pub(super) fn due_again(c: &Claimed, wait: Duration) -> Outcome {
    Outcome { status: DeliveryStatus::Pending, next_attempt_at: Some(Utc::now() + wait), ..untried(c) }
}

/// The event type's own retry schedule, read only for a failed attempt (`None`:
/// the operator's default, or a success, which needs none). Read within what
/// the lease leaves, so that no other worker may send again before the delay.
pub(super) async fn own_schedule(w: &Worker, c: &Claimed, success: bool) -> Option<std::sync::Arc<[Duration]>> {
    if success || c.trigger == Trigger::Manual || c.event_type.is_empty() {
        return None;
    }
    let left = c.lease_ends.saturating_duration_since(std::time::Instant::now()).saturating_sub(LEASE_MARGIN);
    match w.schedules.of(w.state(), &c.tenant_id, &c.event_type, left).await {
        Ok(s) => s,
        // Not known: never judged exhausted on a guess. This attempt waits the
        // default's delay (its last, past its end) and the next failure reads again.
        Err(()) => {
            let d = &w.cfg.retry_schedule;
            let last = d.last().copied().unwrap_or(Duration::from_secs(60));
            Some((0..=c.attempts as usize).map(|i| d.get(i).copied().unwrap_or(last)).collect())
        }
    }
}

/// An attempt made: its record, and the delivery's next state, on the event
/// type's own schedule (`own`) or the default.
pub(super) fn finish(
    w: &Worker,
    c: &Claimed,
    url: String,
    sent: send::Sent,
    request_headers: String,
    bytes: i64,
    own: Option<&[Duration]>,
) -> Outcome {
    w.metrics.duration.observe(sent.duration.as_secs_f64());
    w.metrics.attempt(c.tenant_id.as_str(), sent.outcome.label());
    let mut out = untried(c);
    let success = sent.outcome == send::Outcome::Success;
    out.attempt = Some(AttemptRecord {
        id: AttemptId::generate(),
        url,
        success,
        status_code: sent.status as i16,
        response: sent.body,
        duration_ms: sent.duration.as_millis() as i64,
        at: Utc::now(),
        request_headers,
        bytes,
    });
    out.disable_endpoint = sent.status == 410;
    if success {
        out.status = DeliveryStatus::Success;
    } else if c.trigger != Trigger::Manual && !out.disable_endpoint {
        let made = c.attempts as usize + 1;
        if let Some(delay) = schedule::next_delay(own.unwrap_or(&w.cfg.retry_schedule), made, sent.retry_after) {
            out.status = DeliveryStatus::Pending;
            out.next_attempt_at = Some(Utc::now() + delay);
        }
    }
    out.notice = notice(c, &out);
    out
}

/// Kept between an attempt's end and its lease's: the request's last bytes and
/// the clocks' granularity.
const LEASE_MARGIN: Duration = Duration::from_millis(500);

/// What the claim's lease leaves for the attempt.
pub(super) enum Room {
    /// Send, within this bound.
    Send(Duration),
    /// Another claim owns the delivery now (a resend, or a lease that ran out).
    NotOwner,
    /// Too little left, and the lease could not be renewed (Postgres is slow).
    Later,
}

/// The attempt's bound. Time spent since the claim (its commit, the throttle's
/// Redis, the networks lookup) comes off the lease; when less than the timeout
/// is left, the lease is renewed first (fenced by the claim's token), so the
/// attempt gets its whole timeout and the endpoint is not blamed for the time
/// Hookgate lost. If the renewal cannot be made, what is left bounds the attempt
/// ([`attempt_bound`]).
pub(super) async fn room_in_lease(w: &Worker, c: &Claimed) -> Room {
    let timeout = w.cfg.timeout;
    let mut ends = c.lease_ends;
    if ends.saturating_duration_since(Instant::now()) < timeout + LEASE_MARGIN {
        let renewed = db::bounded(w.state().db_budget(), async {
            let conn = db::conn(&w.state().db).await?;
            queues::extend_lease(&conn, &c.tenant_id, c, w.cfg.lease).await
        })
        .await;
        match renewed {
            Ok(Some(lease)) => ends = lease.ends(),
            Ok(None) => return Room::NotOwner,
            Err(e) => {
                db::forget_stale_plans(&w.state().db, &e);
                tracing::warn!(error = %e, msg = %c.msg_id, "renewing a lease failed; the attempt gets what is left")
            }
        }
    }
    attempt_bound(ends, Instant::now(), timeout).map_or(Room::Later, Room::Send)
}

/// How long the attempt may take: the timeout, or what is left of the lease
/// less [`LEASE_MARGIN`] if that is shorter; `None` when that is under half the timeout.
fn attempt_bound(lease_ends: Instant, now: Instant, timeout: Duration) -> Option<Duration> {
    let left = lease_ends.saturating_duration_since(now).saturating_sub(LEASE_MARGIN);
    let bound = left.min(timeout);
    (bound >= timeout / 2 && !bound.is_zero()).then_some(bound)
}

/// What an attempt tells the operational webhooks, as Svix decides it: the fourth
/// scheduled attempt failing with retries left, the last one failing, or one
/// after the fourth succeeding. Manual resends tell nothing.
pub(super) fn notice(c: &Claimed, out: &Outcome) -> Option<AttemptNotice> {
    const FAILING_AFTER: i32 = 4;
    let attempt = out.attempt.as_ref()?;
    if c.trigger == Trigger::Manual {
        return None;
    }
    let made = c.attempts + 1;
    match (attempt.success, out.status) {
        (true, _) if made > FAILING_AFTER => Some(AttemptNotice::Recovered),
        (false, DeliveryStatus::Pending) if made == FAILING_AFTER => Some(AttemptNotice::Failing),
        (false, DeliveryStatus::Failed) => Some(AttemptNotice::Exhausted),
        _ => None,
    }
}

/// What identifies one event on the wire, whichever endpoint it goes to.
pub(crate) struct Envelope<'a> {
    /// The `webhook-id`: stable across retries.
    pub msg_id: &'a str,
    pub content_type: &'a str,
    /// Sent as `Idempotency-Key`; `None` sends the message id.
    pub idempotency_key: Option<&'a str>,
    /// Whether the `svix-*` header aliases go too.
    pub svix_aliases: bool,
}

/// A delivery request: custom headers first, then Hookgate's own, which win.
pub(crate) fn signed_request(
    url: &str,
    custom: &serde_json::Value,
    keys: &[signing::EndpointSecret],
    envelope: &Envelope<'_>,
    body: Vec<u8>,
) -> Request {
    let Envelope { msg_id, content_type, idempotency_key, svix_aliases } = *envelope;
    let timestamp = Utc::now().timestamp();
    let mut headers = HeaderMap::new();
    if let Some(custom) = custom.as_object() {
        for (k, v) in custom {
            if let Some(v) = v.as_str() {
                send::header(&mut headers, k, v);
            }
        }
    }
    let signature = signing::signature_header(keys, msg_id, timestamp, &body);
    let ts = timestamp.to_string();
    for (name, value) in [
        ("content-type", content_type),
        ("webhook-id", msg_id),
        ("webhook-timestamp", &ts),
        ("webhook-signature", &signature),
        ("idempotency-key", idempotency_key.unwrap_or(msg_id)),
    ] {
        send::header(&mut headers, name, value);
    }
    if svix_aliases {
        for (name, value) in [("svix-id", msg_id), ("svix-timestamp", &ts), ("svix-signature", &signature)] {
            send::header(&mut headers, name, value);
        }
    }
    Request { url: url.to_owned(), headers, body, put: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_ends_before_its_lease_and_is_not_made_with_less_than_half_its_time() {
        let now = Instant::now();
        let timeout = Duration::from_secs(15);
        let s = Duration::from_secs;
        assert_eq!(attempt_bound(now + s(30), now, timeout), Some(timeout), "a fresh lease: the whole timeout");
        assert_eq!(attempt_bound(now + s(12), now, timeout), Some(Duration::from_millis(11_500)), "cut to the lease");
        assert_eq!(attempt_bound(now + s(8), now, timeout), Some(Duration::from_millis(7_500)), "half the timeout");
        assert_eq!(attempt_bound(now + s(7), now, timeout), None, "less than half: not made");
        assert_eq!(attempt_bound(now, now + s(1), timeout), None, "a lease run out: not made");
    }
}
