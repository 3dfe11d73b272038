//! Delivering one claimed row: the endpoint's checks, signing, the attempt, and
//! what the delivery's next state is.

use std::time::Duration;

use chrono::Utc;
use hookgate_shared::{
    ids::AttemptId,
    store::deliveries::{self, AttemptRecord, Claimed, Outcome},
};
use rand::Rng;
use reqwest::header::HeaderMap;

use super::{
    schedule,
    send::{self, Request},
    Worker,
};
use crate::{api::secret_purpose, signing};

/// Delivers one claimed row and says what became of it.
pub(super) async fn deliver(w: &Worker, c: Claimed) -> Outcome {
    let mut out = Outcome {
        tenant_id: c.tenant_id.clone(),
        app_id: c.app_id.clone(),
        msg_id: c.msg_id.clone(),
        endpoint_id: c.endpoint_id.clone(),
        trigger: c.trigger,
        attempt: None,
        status: deliveries::FAILED,
        next_attempt_at: None,
        disable_endpoint: false,
    };
    // Deleted or disabled since the message was created: nothing to send to.
    let Some(ep) = c.endpoint.as_ref().filter(|e| !e.disabled) else {
        return out;
    };
    // The endpoint's own rate, then the application's, shared by its endpoints.
    let limits = [
        (ep.throttle_rate, format!("{}:{}:{}", c.tenant_id, c.app_id, c.endpoint_id)),
        (c.app_throttle_rate, format!("{}:{}", c.tenant_id, c.app_id)),
    ];
    for (rate, key) in limits {
        let Some(rate) = rate else { continue };
        if let Some(wait) = w.throttle.check(&key, rate).await {
            // Spread the waiting deliveries so they do not all return at once.
            let spread = Duration::from_millis(rand::rng().random_range(0..1000));
            out.status = deliveries::PENDING;
            out.next_attempt_at = Some(Utc::now() + (wait + spread));
            return out;
        }
    }
    let keys = match endpoint_keys(w.state(), &c.tenant_id, &c.app_id, &c.endpoint_id, ep) {
        Ok(k) => k,
        Err(e) => {
            tracing::error!(endpoint = %c.endpoint_id, error = %e, "endpoint secret cannot be opened; delivery failed");
            return out;
        }
    };
    let request = signed_request(
        &ep.url,
        &ep.headers,
        &keys,
        c.msg_id.as_str(),
        &c.content_type,
        c.idempotency_key.as_deref(),
        c.svix_headers,
        c.payload.clone(),
    );
    let lag = (Utc::now() - c.due_at).to_std().unwrap_or_default();
    w.metrics.lag.observe(lag.as_secs_f64());
    let sent = w.sender.send(request).await;
    w.metrics.duration.observe(sent.duration.as_secs_f64());
    w.metrics.attempt(c.tenant_id.as_str(), sent.outcome.label());

    let success = sent.outcome == send::Outcome::Success;
    out.attempt = Some(AttemptRecord {
        id: AttemptId::generate(),
        url: ep.url.clone(),
        success,
        status_code: sent.status as i16,
        response: sent.body,
        duration_ms: sent.duration.as_millis() as i64,
    });
    out.disable_endpoint = sent.status == 410;
    if success {
        out.status = deliveries::SUCCESS;
    } else if c.trigger != deliveries::TRIGGER_MANUAL && !out.disable_endpoint {
        let made = c.attempts as usize + 1;
        if let Some(delay) = schedule::next_delay(&w.cfg.retry_schedule, made, sent.retry_after) {
            out.status = deliveries::PENDING;
            out.next_attempt_at = Some(Utc::now() + delay);
        }
    }
    out
}

/// A delivery request: custom headers first, then Hookgate's own, which win.
pub(crate) fn signed_request(
    url: &str,
    custom: &serde_json::Value,
    keys: &[Vec<u8>],
    msg_id: &str,
    content_type: &str,
    idempotency_key: Option<&str>,
    svix_aliases: bool,
    body: Vec<u8>,
) -> Request {
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
    Request { url: url.to_owned(), headers, body }
}

/// The keys that sign: the current secret, and the previous one during its grace period.
pub(crate) fn endpoint_keys(
    state: &hookgate_shared::AppState,
    tenant: &hookgate_shared::ids::TenantId,
    app: &hookgate_shared::ids::AppId,
    endpoint: &hookgate_shared::ids::EndpointId,
    ep: &deliveries::ClaimedEndpoint,
) -> Result<Vec<Vec<u8>>, String> {
    let tenant_key = state.config.master_key.tenant_key(tenant);
    let purpose = secret_purpose(app, endpoint);
    let open = |sealed: &[u8]| -> Result<Vec<u8>, String> {
        let text = tenant_key.open(&purpose, sealed).map_err(|e| e.to_string())?;
        signing::key_bytes(&String::from_utf8_lossy(&text)).map_err(|e| e.to_string())
    };
    let mut keys = vec![open(&ep.secret)?];
    if let (Some(old), Some(until)) = (&ep.old_secret, ep.old_secret_until) {
        if until > Utc::now() {
            keys.push(open(old)?);
        }
    }
    Ok(keys)
}
