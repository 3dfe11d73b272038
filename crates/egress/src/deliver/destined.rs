//! Delivering one claimed row to a destination that is not an HTTP endpoint: the
//! same lease bound, attempt record and retry schedule, a publish in place of a request.

use std::time::Duration;

use chrono::Utc;
use hookgate_shared::store::deliveries::{Claimed, ClaimedEndpoint, Outcome};

use super::{
    attempt::{due_again, finish, room_in_lease, untried, Envelope, Room},
    Worker,
};
use crate::{
    destinations::{config::Config, Outbound},
    signing,
    ssrf::Guard,
};

/// Hands a claimed message to its destination and says what became of it.
pub(super) async fn deliver(
    w: &Worker,
    c: &Claimed,
    ep: &ClaimedEndpoint,
    keys: &[signing::EndpointSecret],
    envelope: &Envelope<'_>,
    payload: &[u8],
) -> Outcome {
    let Some(sealed) = ep.destination.as_deref() else { return untried(c) };
    let cfg = match Config::open(w.state(), &c.tenant_id, &c.app_id, &c.endpoint_id, sealed) {
        Ok(cfg) => cfg,
        // Not the destination's fault (a key or a format this build does not
        // read, as in a rolling deploy): it waits rather than fail.
        Err(e) => {
            tracing::error!(endpoint = %c.endpoint_id, error = %e, "destination configuration cannot be opened; delivery waits");
            return due_again(c, Duration::from_secs(30));
        }
    };
    let (guard, sender, opened) = match hookgate_shared::networks::allowed(w.state(), &c.tenant_id).await {
        Ok(allow) => {
            let guard = Guard::new(allow.to_vec()).protecting(w.state().own_services.clone());
            (guard, w.senders.for_networks(&allow), !allow.is_empty())
        }
        Err(e) => {
            tracing::warn!(error = %e, tenant = %c.tenant_id, "the tenant's networks could not be read; delivery waits");
            return due_again(c, Duration::from_secs(1));
        }
    };
    let bound = match room_in_lease(w, c).await {
        Room::Send(bound) => bound,
        Room::NotOwner => return due_again(c, Duration::ZERO),
        Room::Later => return due_again(c, Duration::from_secs(1)),
    };
    let timestamp = Utc::now().timestamp();
    let signature = signing::signature_header(keys, envelope.msg_id, timestamp, payload);
    let headers = [
        ("webhook-id".to_owned(), envelope.msg_id.to_owned()),
        ("webhook-timestamp".to_owned(), timestamp.to_string()),
        ("webhook-signature".to_owned(), signature),
        ("event-type".to_owned(), c.event_type.clone()),
    ];
    let out = Outbound {
        app_id: c.app_id.as_str(),
        msg_id: envelope.msg_id,
        event_type: &c.event_type,
        event_id: c.event_id.as_deref(),
        channels: c.channels.as_deref(),
        payload,
        content_type: envelope.content_type,
        created_at: c.created_at.unwrap_or_else(Utc::now),
        timestamp,
        headers: &headers,
    };
    let key = (c.tenant_id.clone(), c.app_id.clone(), c.endpoint_id.clone());
    // As for an endpoint's response: the answer of a private network that an
    // allow-list opened is not kept unless the operator says so, judged on the
    // addresses the hand-over dialled. Only an allow-list opens a private network.
    let hide_private = opened && !w.state().config.egress_record_private_responses;
    let sent = w.destinations.publish(&key, sealed, &cfg, &guard, &sender, &out, bound, hide_private).await;
    let kind = ep.kind.type_name().unwrap_or("http");
    w.metrics.destination(kind, sent.outcome.label());
    let recorded = serde_json::json!({
        "webhook-id": envelope.msg_id,
        "webhook-timestamp": timestamp.to_string(),
        "content-type": envelope.content_type,
    })
    .to_string();
    let own = super::attempt::own_schedule(w, c, sent.outcome == super::send::Outcome::Success).await;
    finish(w, c, ep.url.clone(), sent, recorded, payload.len() as i64, own.as_deref())
}
