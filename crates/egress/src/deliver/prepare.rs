//! Delivering one claimed row: the endpoint's checks, signing, the attempt, and
//! what the delivery's next state is.

use hookgate_shared::status::{DeliveryStatus, Trigger};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use hookgate_shared::{
    ids::AttemptId,
    store::deliveries::{AttemptRecord, Claimed, Outcome},
    trace,
};
use rand::Rng;

use super::{
    attempt::{due_again, finish, notice, own_schedule, room_in_lease, signed_request, untried, Envelope, Room},
    authorized::{self, Authorized},
    schedule, send, shares, throttle,
    transformed::Applied,
    Worker,
};
use crate::secrets;
use crate::transform::{Method, Webhook};

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
    let span = super::attempt::attempt_span(c.msg_id.as_str(), c.endpoint_id.as_str(), c.attempts + 1);
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
