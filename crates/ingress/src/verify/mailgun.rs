//! Mailgun: the body carries `signature: {timestamp, token, signature}` (JSON
//! webhooks) or `timestamp`, `token`, `signature` fields (legacy form webhooks),
//! the signature being hex HMAC-SHA256(signing key, timestamp + token). Mailgun
//! retries for 8 hours with the first signature, so the timestamp may be up to
//! 12 hours old (less than the shortest dedupe window, a day). The signature does
//! not cover the event, so the key is the signed `token`: the same on every retry,
//! and a captured signature replayed with other event data is a duplicate, never
//! a new event. `event-data.event` is the type.

use serde_json::Value;

use super::scheme::{any_matches, check_timestamp, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};
use crate::key::{KeyKind, KeyMissing};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Custom(key),
    event_type: TypeRule::Custom(event_type),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const WHERE: &str = "body `signature`";
const TOLERANCE_SECS: i64 = 12 * 3600;

/// `(timestamp, token, signature)` from a JSON or form body.
fn parts(body: &[u8]) -> Option<(String, String, String)> {
    if let Ok(doc) = serde_json::from_slice::<Value>(body) {
        let sig = doc.get("signature")?;
        let field = |k: &str| match sig.get(k)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        return Some((field("timestamp")?, field("token")?, field("signature")?));
    }
    let field = |k: &str| url::form_urlencoded::parse(body).find(|(n, _)| n == k).map(|(_, v)| v.into_owned());
    Some((field("timestamp")?, field("token")?, field("signature")?))
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let (ts, token, sig) = parts(req.body).ok_or_else(|| VerifyError::MissingHeader(WHERE.into()))?;
    let sig = hex::decode(sig).map_err(|_| VerifyError::Malformed(WHERE.into()))?;
    if !any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &[ts.as_bytes(), token.as_bytes()])) {
        return Err(VerifyError::Mismatch(WHERE.into()));
    }
    let ts: i64 = ts.parse().map_err(|_| VerifyError::Malformed(WHERE.into()))?;
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

/// The signed token: the one part of the request an attacker cannot choose.
fn key(req: &Request) -> Result<(KeyKind, Vec<u8>), KeyMissing> {
    match parts(req.body) {
        Some((_, token, _)) if !token.is_empty() => Ok((KeyKind::Provider, token.into_bytes())),
        _ => Err(KeyMissing("field `/signature/token` is absent from the body".into())),
    }
}

fn event_type(req: &Request) -> Option<String> {
    if let Ok(doc) = serde_json::from_slice::<Value>(req.body) {
        return doc.pointer("/event-data/event").and_then(Value::as_str).map(str::to_owned);
    }
    url::form_urlencoded::parse(req.body).find(|(k, _)| k == "event").map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn a_json_and_a_form_webhook_verify_and_a_changed_token_does_not() {
        let sig = hex::encode(mac(
            Hash::Sha256,
            b"key-1",
            &[b"1529006854", b"a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"],
        ));
        let body = format!(
            r#"{{"signature":{{"timestamp":"1529006854","token":"a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0","signature":"{sig}"}},"event-data":{{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}}}"#
        );
        let p = Provider::Mailgun;
        let none = h(&[]);
        let r = req(&p, &none, body.as_bytes(), 1529006854);
        assert_eq!(check(&r, &s("key-1")), Ok(()));
        assert_eq!(key(&r).unwrap().1, b"a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0");
        let late = |secs: i64| check(&req(&p, &none, body.as_bytes(), 1529006854 + secs), &s("key-1"));
        assert_eq!(late(8 * 3600), Ok(()), "Mailgun's last retry, with the first signature");
        assert_eq!(late(12 * 3600 + 1), Err(VerifyError::Timestamp(43200)));
        // Other event data under a captured signature keys as the same event.
        let replayed = body.replace("CPgfbmQMTCKtHW6uIWtuVe", "forged");
        assert_eq!(key(&req(&p, &none, replayed.as_bytes(), 0)).unwrap(), key(&r).unwrap());
        assert_eq!(event_type(&r).as_deref(), Some("delivered"));
        let form = format!("timestamp=1529006854&token=a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0&signature={sig}&event=opened");
        assert_eq!(check(&req(&p, &none, form.as_bytes(), 1529006854), &s("key-1")), Ok(()));
        let changed = form.replace("token=a8", "token=b8");
        assert!(matches!(
            check(&req(&p, &none, changed.as_bytes(), 1529006854), &s("key-1")),
            Err(VerifyError::Mismatch(_))
        ));
        assert!(matches!(check(&req(&p, &none, b"{}", 0), &s("key-1")), Err(VerifyError::MissingHeader(_))));
    }
}
