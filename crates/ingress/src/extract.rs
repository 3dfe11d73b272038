//! What a request is: its idempotency value (the provider's stable id, or what the
//! source configured) and its event type.

use serde_json::Value;

pub use hookgate_shared::source::KeySpec;

use crate::{
    key::{fields_value, KeyKind, KeyMissing},
    verify::{preset, Headers, KeyRule, Request, TypeRule},
};

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
        .ok_or_else(|| KeyMissing::header(name))
}

/// The idempotency value and its kind; `None` when the source admits every request.
pub fn key_value(spec: &KeySpec, req: &Request) -> Result<Option<(KeyKind, Vec<u8>)>, KeyMissing> {
    let (headers, body) = (req.headers, req.body);
    // A provider whose key is its own only (PayPal, whose body a CRC32 alone
    // covers) is keyed so whatever a source was configured with: a rule over the
    // body would admit forged bodies as new events.
    let own_only = crate::verify::preset(req.provider).door.own_key_only.is_some();
    let spec = if own_only { &KeySpec::Provider } else { spec };
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
        KeySpec::Provider => match &preset(req.provider).key {
            KeyRule::Header(name) => (KeyKind::Provider, header_value(headers, name)?),
            KeyRule::Pointer(p) => {
                let why = format!("{}'s `{}`", req.provider.name(), p.trim_start_matches('/'));
                (KeyKind::Provider, pointer_value(&json(body, &why)?, p)?)
            }
            KeyRule::Body => (KeyKind::Body, body.to_vec()),
            KeyRule::Custom(rule) => rule(req)?,
        },
    };
    Ok(Some(value))
}

/// The event type messages carry, so endpoints can filter on it. Characters an
/// event type may not hold (Shopify's `orders/create`) become `.`.
pub fn event_type(path: Option<&str>, req: &Request) -> String {
    let from_body = |p: &str| {
        serde_json::from_slice::<Value>(req.body)
            .ok()
            .and_then(|d| d.pointer(p).and_then(Value::as_str).map(str::to_owned))
    };
    let raw = match path {
        Some(p) => from_body(p),
        None => match &preset(req.provider).event_type {
            TypeRule::Header(name) => req.headers.get(name).map(str::to_owned),
            TypeRule::Pointer(p) => from_body(p),
            TypeRule::Custom(rule) => rule(req),
            TypeRule::None => None,
        },
    };
    let clean: String = raw
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '.' })
        .take(256)
        .collect();
    if clean.is_empty() {
        req.provider.name().to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::verify::Provider;

    fn h(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn req<'a>(p: &'a Provider, headers: &'a HashMap<String, String>, body: &'a [u8]) -> Request<'a> {
        Request { provider: p, headers, body, method: "POST", url: "https://h.example/in/src_1", now: 0 }
    }

    fn key(
        p: Provider,
        spec: &KeySpec,
        hs: &HashMap<String, String>,
        body: &[u8],
    ) -> Result<Option<(KeyKind, Vec<u8>)>, KeyMissing> {
        key_value(spec, &req(&p, hs, body))
    }

    #[test]
    fn each_provider_yields_its_stable_id() {
        let none = h(&[]);
        let stripe = key(Provider::Stripe, &KeySpec::Provider, &none, br#"{"id":"evt_1","type":"x"}"#);
        assert_eq!(stripe.unwrap().unwrap().1, b"evt_1");
        let gh = h(&[("x-github-hook-id", "42"), ("x-github-delivery", "d-1")]);
        assert_eq!(key(Provider::Github, &KeySpec::Provider, &gh, b"{}").unwrap().unwrap().1, b"42:d-1");
        let slack = key(Provider::Slack, &KeySpec::Provider, &none, br#"{"event_id":"Ev1"}"#);
        assert_eq!(slack.unwrap().unwrap().1, b"Ev1");
        let sw = h(&[("webhook-id", "msg_1")]);
        assert_eq!(key(Provider::StandardWebhooks, &KeySpec::Provider, &sw, b"").unwrap().unwrap().1, b"msg_1");
        let paddle = key(Provider::Paddle, &KeySpec::Provider, &none, br#"{"event_id":"evt_01h"}"#);
        assert_eq!(paddle.unwrap().unwrap(), (KeyKind::Provider, b"evt_01h".to_vec()));
        // WooCommerce's delivery id is unsigned and per second: the body is the key.
        let wc = h(&[("x-wc-webhook-delivery-id", "d9")]);
        assert_eq!(
            key(Provider::Woocommerce, &KeySpec::Provider, &wc, b"{}").unwrap().unwrap(),
            (KeyKind::Body, b"{}".to_vec())
        );
        let zoom = key(Provider::Zoom, &KeySpec::Provider, &none, b"{}").unwrap().unwrap();
        assert_eq!(zoom.0, KeyKind::Body);
    }

    #[test]
    fn a_missing_field_is_named() {
        let none = h(&[]);
        let e = key(Provider::Stripe, &KeySpec::Provider, &none, br#"{"type":"x"}"#).unwrap_err();
        assert!(e.0.contains("/id"), "{e}");
        let e = key(Provider::Stripe, &KeySpec::Provider, &none, b"a=b").unwrap_err();
        assert!(e.0.contains("not JSON"), "{e}");
        let e = key(Provider::Github, &KeySpec::Provider, &h(&[("x-github-hook-id", "1")]), b"{}").unwrap_err();
        assert!(e.0.contains("X-GitHub-Delivery"), "{e}");
        let e = key(Provider::Linear, &KeySpec::Provider, &none, b"{}").unwrap_err();
        assert!(e.0.contains("Linear-Delivery"), "{e}");
        let spec = KeySpec::Fields(vec!["/a".into(), "/b".into()]);
        let e = key(Provider::None, &spec, &none, br#"{"a":1}"#).unwrap_err();
        assert!(e.0.contains("/b"), "{e}");
    }

    #[test]
    fn overrides_and_disabled_take_precedence_over_the_provider() {
        let hs = h(&[("x-id", "abc")]);
        let by_header = key(Provider::Stripe, &KeySpec::Header("X-Id".into()), &hs, b"{}").unwrap().unwrap();
        assert_eq!(by_header, (KeyKind::Header, b"abc".to_vec()));
        assert_eq!(key(Provider::Stripe, &KeySpec::Disabled(true), &hs, b"{}").unwrap(), None);
        let body = key(Provider::None, &KeySpec::Provider, &hs, b"raw").unwrap().unwrap();
        assert_eq!(body, (KeyKind::Body, b"raw".to_vec()));
    }

    #[test]
    fn event_types_come_from_the_provider_and_are_made_filterable() {
        let hs = h(&[("x-shopify-topic", "orders/create"), ("x-github-event", "push"), ("x-event-key", "repo:push")]);
        let t = |p: Provider, body: &[u8]| event_type(None, &req(&p, &hs, body));
        assert_eq!(t(Provider::Shopify, b""), "orders.create");
        assert_eq!(t(Provider::Github, b""), "push");
        assert_eq!(t(Provider::Bitbucket, b""), "repo.push");
        assert_eq!(t(Provider::Stripe, br#"{"type":"invoice.paid"}"#), "invoice.paid");
        assert_eq!(t(Provider::Slack, br#"{"event":{"type":"message"}}"#), "message");
        assert_eq!(t(Provider::Paypal, br#"{"event_type":"PAYMENT.SALE.COMPLETED"}"#), "PAYMENT.SALE.COMPLETED");
        assert_eq!(t(Provider::Hubspot, br#"[{"subscriptionType":"contact.creation"}]"#), "contact.creation");
        assert_eq!(event_type(Some("/kind"), &req(&Provider::None, &hs, br#"{"kind":"k1"}"#)), "k1");
        assert_eq!(t(Provider::None, b"x"), "none");
        assert_eq!(t(Provider::Mailgun, b"x"), "mailgun");
    }
}
