//! The `eventBridge` destination: one event per message on a bus, through the AWS SDK.

use hookgate_shared::status::EndpointKind;
use serde_json::Value;

use super::{
    aws::{aws_config, failure, sdk_client, setup, text_body},
    kind::{http_dialled, invalid, Invalid, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

aws_config! {
    /// `eventBridge`: one event per message on `eventBusName`. `endpointUrl` is
    /// Hookgate's own addition (Svix's type has none), for compatible servers.
    pub struct EventBridge {
        pub event_bus_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub detail_type: Option<String>,
    }
    region implied by |c| super::aws::region_in_arn(&c.event_bus_name);
}

impl Kind for EventBridge {
    const KIND: EndpointKind = EndpointKind::EventBridge;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        if self.event_bus_name.is_empty() || self.event_bus_name.len() > 1600 {
            return Err(invalid("`eventBusName` must be 1 to 1600 characters"));
        }
        self.check_aws(guard)
    }

    fn locator(&self) -> String {
        format!("eventbridge:{}:{}", self.region(), self.event_bus_name)
    }

    fn shown(&self, _names_only: bool) -> Value {
        self.shown_aws()
    }

    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.keep_aws(stored);
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        self.endpoint_url.as_deref().and_then(|u| http_dialled("endpointUrl", u)).into_iter().collect()
    }

    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
        send(self, at, out).await
    }
}

async fn send(cfg: &EventBridge, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
    use aws_sdk_eventbridge::types::PutEventsRequestEntry;
    let client = sdk_client!(aws_sdk_eventbridge, setup(&cfg.access(), &cfg.region(), at.sender, at.bound, at.reached));
    let entry = PutEventsRequestEntry::builder()
        .event_bus_name(&cfg.event_bus_name)
        .source("hookgate")
        .detail_type(cfg.detail_type.as_deref().unwrap_or(out.event_type))
        .detail(detail(out).to_string())
        .build();
    let put = client.put_events().entries(entry).send().await.map_err(|e| failure("EventBridge", e))?;
    match put.entries().first() {
        Some(e) if e.error_code().is_none() => {
            Ok(format!("accepted by EventBridge as {}", e.event_id().unwrap_or("(no id)")))
        }
        Some(e) => Err(Failure::refused(format!(
            "EventBridge refused it: {} {}",
            e.error_code().unwrap_or_default(),
            e.error_message().unwrap_or_default()
        ))),
        None => Err(Failure::refused("EventBridge answered no entry")),
    }
}

/// An EventBridge event's `detail`: the message's id, type and payload (JSON as
/// it is, other bodies as text). Documented in docs/destinations.md.
fn detail(out: &Outbound<'_>) -> serde_json::Value {
    let payload = serde_json::from_slice::<serde_json::Value>(out.payload)
        .unwrap_or_else(|_| serde_json::Value::String(text_body(out).0));
    serde_json::json!({
        "id": out.msg_id,
        "eventType": out.event_type,
        "eventId": out.event_id,
        "timestamp": out.timestamp,
        "payload": payload,
    })
}
