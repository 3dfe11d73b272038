//! What a request is: its idempotency value (the provider's stable id, or what the
//! source configured) and its event type.

use serde_json::Value;

pub use hookgate_shared::source::KeySpec;

use crate::{
    key::{fields_value, KeyKind},
    verify::{Headers, Provider},
};

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
pub fn event_type(provider: &Provider, path: Option<&str>, headers: &dyn Headers, body: &[u8]) -> String {
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
        provider.name().to_owned()
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
    fn event_types_come_from_the_provider_and_are_made_filterable() {
        let hs = h(&[("x-shopify-topic", "orders/create"), ("x-github-event", "push")]);
        assert_eq!(event_type(&Provider::Shopify, None, &hs, b""), "orders.create");
        assert_eq!(event_type(&Provider::Github, None, &hs, b""), "push");
        assert_eq!(event_type(&Provider::Stripe, None, &hs, br#"{"type":"invoice.paid"}"#), "invoice.paid");
        assert_eq!(event_type(&Provider::Slack, None, &hs, br#"{"event":{"type":"message"}}"#), "message");
        assert_eq!(event_type(&Provider::None, Some("/kind"), &hs, br#"{"kind":"k1"}"#), "k1");
        assert_eq!(event_type(&Provider::None, None, &hs, b"x"), "none");
    }
}
