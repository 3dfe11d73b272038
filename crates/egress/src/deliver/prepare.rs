//! Delivering one claimed row: the endpoint's checks, signing, the attempt, and
//! what the delivery's next state is.

use hookgate_shared::status::{DeliveryStatus, Trigger};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use hookgate_shared::{
    db,
    ids::AttemptId,
    store::{
        deliveries::{AttemptRecord, Claimed, Outcome},
        operational::AttemptNotice,
        queues,
    },
    trace,
};
use rand::Rng;
use reqwest::header::HeaderMap;

use super::{
    authorized::{self, Authorized},
    schedule,
    send::{self, Request},
    shares, throttle,
    transformed::Applied,
    Worker,
};
use crate::transform::{Method, Webhook};
use crate::{secrets, signing};

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

/// The URL a destination's transformation sees (and whatever it sets is ignored).
const DESTINATION_URL: &str = "https://destination.hookgate.invalid/";

/// Delivers one claimed row and says what became of it.
pub(super) async fn deliver(w: &Worker, c: Claimed, claim: Option<Arc<str>>) -> Outcome {
    let out = untried(&c);
    // Deleted or disabled since the message was created: nothing to send to.
    let Some(ep) = c.endpoint.as_ref().filter(|e| !e.disabled) else {
        return out;
    };
    // Its payload expired or was expunged: nothing to send (it ends failed, unattempted).
    let Some(payload) = c.payload.as_ref() else {
        tracing::info!(msg = %c.msg_id, endpoint = %c.endpoint_id, "payload expired or expunged; delivery ends unsent");
        return out;
    };
    // The endpoint's own rate, then the application's, shared by its endpoints.
    let limits = [
        (ep.throttle_rate, format!("{}:{}:{}", c.tenant_id, c.app_id, c.endpoint_id), false),
        (c.app_throttle_rate, format!("{}:{}", c.tenant_id, c.app_id), true),
    ];
    for (rate, key, whole_app) in limits {
        let Some(rate) = rate else { continue };
        let queue = shares::queue_of(&c);
        let hold = |wait| if whole_app { w.shares.hold_app(&queue, wait) } else { w.shares.hold(&queue, wait) };
        match w.throttle.check(&key, rate).await {
            // Its turn has not come (another worker took the slot): due again after
            // the wait, spread so that the waiting ones do not all return at once;
            // the endpoint is held off meanwhile, so its other deliveries are not
            // claimed (and rewritten) before then.
            Some(wait) => {
                hold(wait);
                let spread = Duration::from_millis(rand::rng().random_range(0..1000));
                return due_again(&c, wait + spread);
            }
            // Sent now: the endpoint's next waits its spacing.
            None => hold(throttle::interval(rate)),
        }
    }
    // The endpoint's transformation, if it has one in force, decides what is sent.
    let (url, put, payload, content_type) = match ep.transformation_at {
        None => (ep.url.clone(), false, payload.clone(), c.content_type.clone()),
        Some(at) => {
            let json = c.content_type.starts_with("application/json");
            let hook = Webhook {
                event_type: c.event_type.clone(),
                method: Method::Post,
                // A destination's handler sees a stand-in URL (its own is no HTTP
                // URL, and what it sets there is not used).
                url: if ep.kind.is_destination() { DESTINATION_URL.to_owned() } else { ep.url.clone() },
                payload: payload.clone(),
                json,
            };
            match w.transforms.apply(w.state(), &c, at, hook).await {
                Applied::Send(h) => {
                    // Text the handler turned into JSON goes as JSON.
                    let ct = if h.json && !json { "application/json".to_owned() } else { c.content_type.clone() };
                    (h.url, h.method == Method::Put, h.payload, ct)
                }
                Applied::Cancel => return Outcome { status: DeliveryStatus::Canceled, ..untried(&c) },
                Applied::Failed(e) => {
                    let own = own_schedule(w, &c, false).await;
                    return transformation_failed(w, &c, &ep.url, &e, own.as_deref());
                }
                Applied::Unreadable(e) => {
                    tracing::warn!(error = %e, endpoint = %c.endpoint_id, "the transformation could not be read; delivery waits");
                    return due_again(&c, Duration::from_secs(1));
                }
            }
        }
    };
    let keys = match secrets::signing_keys(w.state(), &c.tenant_id, &c.app_id, &c.endpoint_id, ep) {
        Ok(k) => k,
        Err(e) => {
            tracing::error!(endpoint = %c.endpoint_id, error = %e, "endpoint secret cannot be opened; delivery failed");
            return out;
        }
    };
    let envelope = Envelope {
        msg_id: c.msg_id.as_str(),
        content_type: &content_type,
        idempotency_key: c.idempotency_key.as_deref(),
        svix_aliases: c.svix_headers,
    };
    let headers = match secrets::open_headers(w.state(), &c.tenant_id, &c.app_id, &c.endpoint_id, &ep.headers) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(endpoint = %c.endpoint_id, error = %e, "endpoint headers cannot be opened; delivery failed");
            return out;
        }
    };
    if ep.kind.is_destination() {
        let lag = (Utc::now() - c.due_at).to_std().unwrap_or_default();
        w.metrics.lag.observe(lag.as_secs_f64());
        return super::destined::deliver(w, &c, ep, &keys, &envelope, &payload).await;
    }
    let mut request = signed_request(&url, &headers, &keys, &envelope, payload);
    request.put = put;
    let bytes = request.body.len() as i64;
    let lag = (Utc::now() - c.due_at).to_std().unwrap_or_default();
    w.metrics.lag.observe(lag.as_secs_f64());
    // The attempt continues the trace of the request that created the message, and
    // links to the claim that picked it up.
    let span = send::attempt_span(c.msg_id.as_str(), c.endpoint_id.as_str(), c.attempts + 1);
    trace::set_parent(&span, c.traceparent.as_deref());
    trace::add_link(&span, claim.as_deref());
    // The operator's networks and the tenant's own; if they cannot be read now,
    // the operator's alone (closed to the tenant's, never more open).
    let allow = match hookgate_shared::networks::allowed(w.state(), &c.tenant_id).await {
        Ok(allow) => allow,
        // Unknown now: not an attempt (it would read as blocked, and spend a
        // retry); due again in a moment, as a throttle's wait is.
        Err(e) => {
            tracing::warn!(error = %e, tenant = %c.tenant_id, "the tenant's networks could not be read; delivery waits");
            return due_again(&c, Duration::from_secs(1));
        }
    };
    // The attempt ends before the lease does, or another worker could send the
    // same delivery while this one still waits for its answer.
    let bound = match room_in_lease(w, &c).await {
        Room::Send(bound) => bound,
        Room::NotOwner => {
            // Its result is fenced off: what it says does not matter.
            tracing::info!(msg = %c.msg_id, endpoint = %c.endpoint_id, "the claim passed on before sending; not sent");
            return due_again(&c, Duration::ZERO);
        }
        Room::Later => {
            tracing::info!(msg = %c.msg_id, endpoint = %c.endpoint_id, "too little of the lease left to send; delivery due again");
            return due_again(&c, Duration::from_secs(1));
        }
    };
    // An endpoint's own certificate, CA and OAuth token, if it has them.
    let (sender, bearer, bound) = match ep.auth_at {
        None => (w.senders.for_networks(&allow), None, bound),
        Some(at) => {
            let k = (c.tenant_id.clone(), c.app_id.clone(), c.endpoint_id.clone());
            let started = Instant::now();
            match authorized::authorize(w.state(), &w.auths, &w.senders, &allow, &k, at, bound).await {
                // A token fetched took part of the attempt's time.
                Authorized::Send { sender, bearer } => match bound.checked_sub(started.elapsed()) {
                    Some(left) if !left.is_zero() => (sender, bearer, left),
                    _ => return due_again(&c, Duration::from_secs(1)),
                },
                Authorized::Wait => return due_again(&c, Duration::from_secs(1)),
                Authorized::Failed(sent) => {
                    let own = own_schedule(w, &c, false).await;
                    let recorded = secrets::recorded_headers(&request.headers);
                    return finish(w, &c, url, sent, recorded, bytes, own.as_deref());
                }
            }
        }
    };
    authorized::with_bearer(&mut request, bearer.as_ref());
    let request_headers = secrets::recorded_headers(&request.headers);
    let sent = sender.send_traced(request, span, bound).await;
    authorized::answered(w.state(), &w.auths, bearer.as_ref(), sent.status).await;
    let own = own_schedule(w, &c, sent.outcome == send::Outcome::Success).await;
    finish(w, &c, url, sent, request_headers, bytes, own.as_deref())
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

/// A transformation that failed: an attempt made and failed, its reason in the log
/// (no request went out), retried on the schedule like any failed attempt.
fn transformation_failed(
    w: &Worker,
    c: &Claimed,
    url: &str,
    e: &crate::transform::TransformError,
    own: Option<&[Duration]>,
) -> Outcome {
    tracing::info!(msg = %c.msg_id, endpoint = %c.endpoint_id, error = %e, "transformation failed; attempt failed");
    w.metrics.attempt(c.tenant_id.as_str(), "transformation_failed");
    let mut out = untried(c);
    out.attempt = Some(AttemptRecord {
        id: AttemptId::generate(),
        url: url.to_owned(),
        success: false,
        status_code: 0,
        response: e.to_string(),
        duration_ms: 0,
        at: Utc::now(),
        request_headers: "{}".to_owned(),
        bytes: 0,
    });
    if c.trigger != Trigger::Manual {
        if let Some(delay) = schedule::next_delay(own.unwrap_or(&w.cfg.retry_schedule), c.attempts as usize + 1, None) {
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
fn notice(c: &Claimed, out: &Outcome) -> Option<AttemptNotice> {
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
