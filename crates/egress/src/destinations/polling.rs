//! The `pollingEndpoint` destination: the customer reads its messages from its
//! log (`/poller/{sink}`); nothing is sent, and nothing is configured.

use hookgate_shared::status::EndpointKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    kind::{Invalid, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

/// `pollingEndpoint`: the customer reads its messages (`/poller/{sink}`); nothing to configure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Polling {}

impl Kind for Polling {
    const KIND: EndpointKind = EndpointKind::PollingEndpoint;

    fn check(&self, _: &Guard) -> Result<(), Invalid> {
        Ok(())
    }

    fn locator(&self) -> String {
        "poller".to_owned()
    }

    fn shown(&self, _names_only: bool) -> Value {
        serde_json::json!({})
    }

    /// No secret to keep.
    fn keep_redacted(&mut self, _: &Self) -> Result<(), Invalid> {
        Ok(())
    }

    /// Nothing: the customer comes to it.
    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        Vec::new()
    }

    /// Read by the customer, never handed over.
    async fn publish(&self, _: &HandOver<'_>, _: &Outbound<'_>) -> Result<String, Failure> {
        Err(Failure::reads_its_log())
    }
}
