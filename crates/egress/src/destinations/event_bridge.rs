//! The `eventBridge` destination: one event per message on a bus, through the AWS SDK.

use aws_smithy_types::retry::RetryConfig;
use hookgate_shared::status::EndpointKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    aws::{aws_access, failure, setup, text_body},
    kind::{as_value, http_dialled, invalid, Invalid, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

/// `eventBridge`: one event per message on `eventBusName`. `endpointUrl` is
/// Hookgate's own addition (Svix's type has none), for compatible servers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBridge {
    pub event_bus_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_url: Option<String>,
}

aws_access!(EventBridge, |c| super::aws::region_in_arn(&c.event_bus_name));

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

    /// Svix's `…ConfigOut`: the secret key left out, the region as used.
    fn shown(&self, _names_only: bool) -> Value {
        as_value(&EventBridge { secret_access_key: None, region: Some(self.region()), ..self.clone() })
    }

    /// The secret key, left out (it is never shown), stays as stored while the
    /// key id, the endpoint URL and the region are the same.
    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        let at = (self.access_key_id.clone(), self.endpoint_url.clone(), self.region());
        let was = (stored.access_key_id.clone(), stored.endpoint_url.clone(), stored.region());
        super::aws::keep_secret_key(&mut self.secret_access_key, at, &stored.secret_access_key, was);
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
    let s = setup(&cfg.access(), &cfg.region(), at.sender, at.bound, at.reached);
    let mut conf = aws_sdk_eventbridge::Config::builder()
        .behavior_version_latest()
        .credentials_provider(s.credentials)
        .region(s.region)
        .retry_config(RetryConfig::disabled())
        .http_client(s.bridge);
    if let Some(url) = s.endpoint_url {
        conf = conf.endpoint_url(url);
    }
    let client = aws_sdk_eventbridge::Client::from_conf(conf.build());
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
