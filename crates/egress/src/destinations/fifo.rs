//! The `fifoEndpoint` destination: an HTTP receiver given batches in strict order,
//! read from its log by its own runner (`crate::fifo`), never one delivery at a time.

use hookgate_shared::status::EndpointKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    config::Config,
    kind::{check_http_url, http_dialled, invalid, Invalid, Kind, REDACTED},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

/// `fifoEndpoint`: an HTTP receiver given batches in strict order (`crate::fifo`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fifo {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A FIFO endpoint's `key` as a path into the payload: `customer.id` is
/// `["customer", "id"]`; 1 to 5 parts of 1 to 64 letters, digits, `_` or `-`.
pub fn key_path(key: &str) -> Result<Vec<String>, Invalid> {
    let parts: Vec<String> = key.split('.').map(str::to_owned).collect();
    let ok = |p: &String| {
        (1..=64).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    };
    match parts.len() <= 5 && parts.iter().all(ok) {
        true => Ok(parts),
        false => Err(invalid("`key` must be a path into the payload such as `customer.id`: 1 to 5 parts of 1 to 64 letters, digits, `_` or `-`")),
    }
}

impl Config {
    /// A keyed FIFO endpoint's key path, for the fan-out.
    pub fn fifo_key(&self) -> Option<Vec<String>> {
        match self {
            Config::FifoEndpoint(Fifo { key: Some(k), .. }) => key_path(k).ok(),
            _ => None,
        }
    }
}

impl Kind for Fifo {
    const KIND: EndpointKind = EndpointKind::FifoEndpoint;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        check_http_url(guard, &self.url, "url")?;
        if let Some(h) = &self.headers {
            if h.len() > 20 || h.iter().any(|(k, v)| k.is_empty() || k.len() > 256 || v.len() > 4096) {
                return Err(invalid("`headers`: at most 20, names of 1 to 256 bytes, values up to 4 KiB"));
            }
        }
        if let Some(k) = &self.key {
            key_path(k)?;
        }
        Ok(())
    }

    fn locator(&self) -> String {
        self.url.clone()
    }

    /// Svix's `SinkHttpConfigOut`: headers as an endpoint's are shown, the
    /// credential-like ones by name only.
    fn shown(&self, names_only: bool) -> Value {
        let (mut shown, mut sensitive) = (serde_json::Map::new(), Vec::new());
        for (k, v) in self.headers.iter().flatten() {
            match names_only || crate::secrets::SENSITIVE_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                true => sensitive.push(k.clone()),
                false => drop(shown.insert(k.clone(), Value::String(v.clone()))),
            }
        }
        serde_json::json!({"url": self.url, "headers": {"headers": shown, "sensitive": sensitive}, "key": self.key})
    }

    /// A sensitive header sent back redacted keeps its value, for the same URL only.
    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        let same = self.url == stored.url;
        for (k, v) in self.headers.iter_mut().flatten() {
            if v == REDACTED {
                match stored.headers.as_ref().and_then(|o| o.get(k)).filter(|_| same) {
                    Some(kept) => v.clone_from(kept),
                    None => return Err(invalid(format!("`headers`: give `{k}` again"))),
                }
            }
        }
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        http_dialled("url", &self.url).into_iter().collect()
    }

    /// Read in order from its log, never handed over one delivery at a time.
    async fn publish(&self, _: &HandOver<'_>, _: &Outbound<'_>) -> Result<String, Failure> {
        Err(Failure::reads_its_log())
    }
}
