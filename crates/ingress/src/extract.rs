//! What a request is: its idempotency value (the provider's stable id, or what the
//! source configured) and its event type.

use hookgate_shared::inbound_key::{fields_value, KeyKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::verify::{Headers, Provider};

/// A source's idempotency setting; `null` in the API means [`KeySpec::Provider`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum KeySpec {
    /// The provider's own stable id (the default).
    Provider,
    Header(String),
    JsonPointer(String),
    /// A hash of several JSON fields, for providers without a stable id.
    Fields(Vec<String>),
    /// A hash of the raw body (`{"body": true}`).
    Body(bool),
    /// Every request is admitted (`{"disabled": true}`): for naturally idempotent feeds.
    Disabled(bool),
}

impl KeySpec {
    /// Parses the stored or requested setting; `None` is the provider's id.
    pub fn parse(v: Option<&Value>) -> Result<Self, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(KeySpec::Provider) };
        if !v.is_object() {
            return Err("`idempotency` must be an object such as {\"header\": NAME}, or null".into());
        }
        let spec: KeySpec = serde_json::from_value(v.clone()).map_err(|_| {
            "`idempotency` must be one of {header: NAME}, {jsonPointer: \"/a/b\"}, {fields: [\"/a\", …]}, \
             {body: true}, {disabled: true}"
                .to_owned()
        })?;
        match &spec {
            KeySpec::Header(h) if h.trim().is_empty() => Err("`idempotency.header` must name a header".into()),
            KeySpec::JsonPointer(p) if !p.starts_with('/') => {
                Err("`idempotency.jsonPointer` must start with `/`".into())
            }
            KeySpec::Fields(f) if f.is_empty() || f.iter().any(|p| !p.starts_with('/')) => {
                Err("`idempotency.fields` must list JSON pointers starting with `/`".into())
            }
            KeySpec::Body(false) | KeySpec::Disabled(false) => Err("use `true`, or leave `idempotency` unset".into()),
            _ => Ok(spec),
        }
    }
}

/// Why no key could be derived: names the missing field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyMissing(pub String);

fn json(body: &[u8], why: &str) -> Result<Value, KeyMissing> {
    serde_json::from_slice(body).map_err(|_| KeyMissing(format!("the body is not JSON, but {why} needs a JSON body")))
}

fn pointer_value(doc: &Value, pointer: &str) -> Result<Vec<u8>, KeyMissing> {
    match doc.pointer(pointer) {
        None | Some(Value::Null) => Err(KeyMissing(format!("field `{pointer}` is absent from the body"))),
        Some(Value::String(s)) if s.is_empty() => Err(KeyMissing(format!("field `{pointer}` is empty"))),
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(other) => Ok(other.to_string().into_bytes()),
    }
}

fn header_value(headers: &dyn Headers, name: &str) -> Result<Vec<u8>, KeyMissing> {
    headers
        .get(&name.to_ascii_lowercase())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| v.as_bytes().to_vec())
        .ok_or_else(|| KeyMissing(format!("header `{name}` is missing")))
}

/// The idempotency value and its kind; `None` when the source admits every request.
pub fn key_value(
    provider: &Provider,
    spec: &KeySpec,
    headers: &dyn Headers,
    body: &[u8],
) -> Result<Option<(KeyKind, Vec<u8>)>, KeyMissing> {
    let value = match spec {
        KeySpec::Disabled(_) => return Ok(None),
        KeySpec::Header(name) => (KeyKind::Header, header_value(headers, name)?),
        KeySpec::JsonPointer(p) => (KeyKind::JsonPointer, pointer_value(&json(body, &format!("`{p}`"))?, p)?),
        KeySpec::Fields(ps) => {
            let doc = json(body, "`fields`")?;
            let mut values = Vec::new();
            for p in ps {
                values.push(doc.pointer(p).ok_or_else(|| KeyMissing(format!("field `{p}` is absent from the body")))?);
            }
            (KeyKind::Fields, fields_value(&values))
        }
        KeySpec::Body(_) => (KeyKind::Body, body.to_vec()),
        KeySpec::Provider => match provider {
            Provider::Stripe => (KeyKind::Provider, pointer_value(&json(body, "Stripe's `id`")?, "/id")?),
            Provider::Github => {
                let hook = header_value(headers, "X-GitHub-Hook-ID")?;
                let delivery = header_value(headers, "X-GitHub-Delivery")?;
                (KeyKind::Provider, [hook, b":".to_vec(), delivery].concat())
            }
            Provider::Shopify => (KeyKind::Provider, header_value(headers, "X-Shopify-Webhook-Id")?),
            Provider::Slack => (KeyKind::Provider, pointer_value(&json(body, "Slack's `event_id`")?, "/event_id")?),
            Provider::StandardWebhooks => (KeyKind::Provider, header_value(headers, "webhook-id")?),
            // No stable id of their own: the body itself.
            Provider::Hmac(_) | Provider::None => (KeyKind::Body, body.to_vec()),
        },
    };
    Ok(Some(value))
}

/// The event type messages carry, so endpoints can filter on it. Characters an
/// event type may not hold (Shopify's `orders/create`) become `.`.
pub fn event_type(provider: &Provider, name: &str, path: Option<&str>, headers: &dyn Headers, body: &[u8]) -> String {
    let doc = || serde_json::from_slice::<Value>(body).ok();
    let from_body = |p: &str| doc().and_then(|d| d.pointer(p).and_then(Value::as_str).map(str::to_owned));
    let raw = match path {
        Some(p) => from_body(p),
        None => match provider {
            Provider::Stripe | Provider::StandardWebhooks => from_body("/type"),
            Provider::Github => headers.get("x-github-event").map(str::to_owned),
            Provider::Shopify => headers.get("x-shopify-topic").map(str::to_owned),
            Provider::Slack => from_body("/event/type").or_else(|| from_body("/type")),
            Provider::Hmac(_) | Provider::None => None,
        },
    };
    let clean: String = raw
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '.' })
        .take(256)
        .collect();
    if clean.is_empty() {
        name.to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn h(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_provider_yields_its_stable_id() {
        let none = h(&[]);
        let stripe = key_value(&Provider::Stripe, &KeySpec::Provider, &none, br#"{"id":"evt_1","type":"x"}"#);
        assert_eq!(stripe.unwrap().unwrap().1, b"evt_1");
        let gh = h(&[("x-github-hook-id", "42"), ("x-github-delivery", "d-1")]);
        assert_eq!(key_value(&Provider::Github, &KeySpec::Provider, &gh, b"{}").unwrap().unwrap().1, b"42:d-1");
        let slack = key_value(&Provider::Slack, &KeySpec::Provider, &none, br#"{"event_id":"Ev1"}"#);
        assert_eq!(slack.unwrap().unwrap().1, b"Ev1");
        let sw = h(&[("webhook-id", "msg_1")]);
        assert_eq!(key_value(&Provider::StandardWebhooks, &KeySpec::Provider, &sw, b"").unwrap().unwrap().1, b"msg_1");
    }

    #[test]
    fn a_missing_field_is_named() {
        let none = h(&[]);
        let e = key_value(&Provider::Stripe, &KeySpec::Provider, &none, br#"{"type":"x"}"#).unwrap_err();
        assert!(e.0.contains("/id"), "{e}");
        let e = key_value(&Provider::Stripe, &KeySpec::Provider, &none, b"a=b").unwrap_err();
        assert!(e.0.contains("not JSON"), "{e}");
        let e = key_value(&Provider::Github, &KeySpec::Provider, &h(&[("x-github-hook-id", "1")]), b"{}").unwrap_err();
        assert!(e.0.contains("X-GitHub-Delivery"), "{e}");
        let spec = KeySpec::Fields(vec!["/a".into(), "/b".into()]);
        let e = key_value(&Provider::None, &spec, &none, br#"{"a":1}"#).unwrap_err();
        assert!(e.0.contains("/b"), "{e}");
    }

    #[test]
    fn overrides_and_disabled_take_precedence_over_the_provider() {
        let hs = h(&[("x-id", "abc")]);
        let by_header = key_value(&Provider::Stripe, &KeySpec::Header("X-Id".into()), &hs, b"{}").unwrap().unwrap();
        assert_eq!(by_header, (KeyKind::Header, b"abc".to_vec()));
        assert_eq!(key_value(&Provider::Stripe, &KeySpec::Disabled(true), &hs, b"{}").unwrap(), None);
        let body = key_value(&Provider::None, &KeySpec::Provider, &hs, b"raw").unwrap().unwrap();
        assert_eq!(body, (KeyKind::Body, b"raw".to_vec()));
    }

    #[test]
    fn the_setting_parses_from_its_json_forms() {
        use serde_json::json;
        assert_eq!(KeySpec::parse(None).unwrap(), KeySpec::Provider);
        assert_eq!(KeySpec::parse(Some(&json!({"header": "X"}))).unwrap(), KeySpec::Header("X".into()));
        assert_eq!(KeySpec::parse(Some(&json!({"jsonPointer": "/a"}))).unwrap(), KeySpec::JsonPointer("/a".into()));
        assert_eq!(KeySpec::parse(Some(&json!({"body": true}))).unwrap(), KeySpec::Body(true));
        assert!(KeySpec::parse(Some(&json!({"jsonPointer": "a"}))).is_err());
        assert!(KeySpec::parse(Some(&json!({"nope": 1}))).is_err());
    }

    #[test]
    fn event_types_come_from_the_provider_and_are_made_filterable() {
        let hs = h(&[("x-shopify-topic", "orders/create"), ("x-github-event", "push")]);
        assert_eq!(event_type(&Provider::Shopify, "shopify", None, &hs, b""), "orders.create");
        assert_eq!(event_type(&Provider::Github, "github", None, &hs, b""), "push");
        assert_eq!(event_type(&Provider::Stripe, "stripe", None, &hs, br#"{"type":"invoice.paid"}"#), "invoice.paid");
        assert_eq!(event_type(&Provider::Slack, "slack", None, &hs, br#"{"event":{"type":"message"}}"#), "message");
        assert_eq!(event_type(&Provider::None, "none", Some("/kind"), &hs, br#"{"kind":"k1"}"#), "k1");
        assert_eq!(event_type(&Provider::None, "none", None, &hs, b"x"), "none");
    }
}
