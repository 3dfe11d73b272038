//! Twilio: `X-Twilio-Signature: <base64 HMAC-SHA1(auth token, url + params)>`,
//! where a form POST's params are appended sorted (`key` then `value`), and a JSON
//! POST's URL carries `bodySHA256=<hex SHA-256 of the body>` instead. The URL is
//! the source's `publicUrl`, tried with and without its default port as Twilio's
//! own validator does. The key is what is signed (the URL and the sorted params,
//! or the URL with the body's hash): Twilio's scheme signs no time, so an unsigned
//! id (`I-Twilio-Idempotency-Token`) would let a captured request be replayed as
//! new events; and a body re-split (`a=1&b=2` as `a=1b2`, stray `&`) that signs
//! the same keys the same.

use base64::{engine::general_purpose::STANDARD, Engine};
use sha2::{Digest, Sha256};

use super::scheme::{any_matches, header, mac, Hash};
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

const NAME: &str = "x-twilio-signature";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, NAME)?).map_err(|_| VerifyError::Malformed(NAME.into()))?;
    let url = url::Url::parse(req.url).map_err(|_| VerifyError::Mismatch(NAME.into()))?;
    if let Some(want) = pinned_hash(&url) {
        if !hex::decode(want).is_ok_and(|w| super::scheme::ct_eq(&w, &Sha256::digest(req.body))) {
            return Err(VerifyError::Mismatch("bodySHA256".into()));
        }
    }
    let params = signed_params(&url, req.body);
    let ok = variants(req.url, &url).iter().any(|u| {
        any_matches(secrets, std::slice::from_ref(&sig), |s| {
            mac(Hash::Sha1, s.as_bytes(), &[u.as_bytes(), params.as_bytes()])
        })
    });
    if ok {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(NAME.into()))
    }
}

/// The `bodySHA256` a JSON (or any non-form) request's URL carries: the URL alone
/// is then signed, and it pins the body's hash.
fn pinned_hash(url: &url::Url) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == "bodySHA256").map(|(_, v)| v.into_owned())
}

/// What is signed after the URL: nothing when the URL pins the body's hash, else
/// the sorted form params.
fn signed_params(url: &url::Url, body: &[u8]) -> String {
    match pinned_hash(url) {
        Some(_) => String::new(),
        None => sorted_params(body),
    }
}

/// A form body's params, sorted by key then value, each key and value appended.
fn sorted_params(body: &[u8]) -> String {
    let mut pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    pairs.sort();
    pairs.into_iter().map(|(k, v)| k + &v).collect()
}

/// The URL as configured, and with its scheme's default port removed or added:
/// Twilio's validators accept either form. Textual, so nothing else is normalised.
fn variants(raw: &str, url: &url::Url) -> Vec<String> {
    let mut out = vec![raw.to_owned()];
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else { return out };
    let with = format!("{host}:{port}");
    if raw.contains(&with) {
        out.push(raw.replacen(&with, host, 1));
    } else if url.port().is_none() {
        out.push(raw.replacen(host, &with, 1));
    }
    out
}

fn form_field(body: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(body).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// The signed text without the host: the path and query with the sorted params,
/// or with its body hash. The host (and port, which `check` accepts in two forms)
/// is left out: the key is the source's already, and a `Host` a replay chooses
/// must not make a new key.
fn key(req: &Request) -> Result<(KeyKind, Vec<u8>), KeyMissing> {
    let url = url::Url::parse(req.url).ok();
    let params = match &url {
        Some(u) => signed_params(u, req.body),
        None => sorted_params(req.body),
    };
    let path = url.as_ref().map_or(req.url, |u| &u[url::Position::BeforePath..]);
    Ok((KeyKind::Provider, [path.as_bytes(), params.as_bytes()].concat()))
}

/// `message.<MessageStatus>` or `call.<CallStatus>` for status callbacks,
/// `message.received` for an incoming message.
fn event_type(req: &Request) -> Option<String> {
    if let Some(status) = form_field(req.body, "MessageStatus").or_else(|| form_field(req.body, "SmsStatus")) {
        return Some(format!("message.{status}"));
    }
    if let Some(status) = form_field(req.body, "CallStatus") {
        return Some(format!("call.{status}"));
    }
    form_field(req.body, "MessageSid").map(|_| "message.received".to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, s};
    use super::super::Provider;
    use super::*;

    fn request<'a>(
        p: &'a Provider,
        headers: &'a std::collections::HashMap<String, String>,
        url: &'a str,
        body: &'a [u8],
    ) -> Request<'a> {
        Request { provider: p, headers, body, method: "POST", url, now: 0 }
    }

    #[test]
    fn twilios_documented_example_verifies() {
        // Twilio's published example (its request-validation docs and the
        // RequestValidator tests of twilio-php and twilio-csharp): auth token 12345,
        // this URL and these params give the signature below.
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let body = b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212";
        let headers = h(&[(NAME, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")]);
        let p = Provider::Twilio;
        assert_eq!(check(&request(&p, &headers, url, body), &s("12345")), Ok(()));
        assert!(check(&request(&p, &headers, url, b"CallSid=CA1234567890ABCDE&Digits=1"), &s("12345")).is_err());
        assert!(check(&request(&p, &headers, "https://mycompany.com/myapp.php?foo=1", body), &s("12345")).is_err());
        assert_eq!(
            event_type(&request(&p, &headers, url, b"CallSid=CA1&CallStatus=completed")).as_deref(),
            Some("call.completed")
        );
    }

    #[test]
    fn a_json_body_is_pinned_by_its_hash_in_the_url() {
        let body = br#"{"property": "value", "boolean": true}"#;
        let hash = hex::encode(Sha256::digest(body));
        // The hash Twilio's SDK tests publish for this body.
        assert_eq!(hash, "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620");
        let url = format!("https://mycompany.com/myapp.php?foo=1&bar=2&bodySHA256={hash}");
        let sig = STANDARD.encode(mac(Hash::Sha1, b"12345", &[url.as_bytes()]));
        let headers = h(&[(NAME, &sig)]);
        let p = Provider::Twilio;
        assert_eq!(check(&request(&p, &headers, &url, body), &s("12345")), Ok(()));
        assert_eq!(
            check(&request(&p, &headers, &url, br#"{"property": "value", "boolean": false}"#), &s("12345")),
            Err(VerifyError::Mismatch("bodySHA256".into()))
        );
    }

    #[test]
    fn the_key_ignores_the_host_and_port_a_replay_could_choose() {
        let p = Provider::Twilio;
        let hs = h(&[]);
        let body = b"MessageSid=SM1&MessageStatus=sent";
        let a = key(&request(&p, &hs, "https://h.example/in/src_1", body)).unwrap();
        let b = key(&request(&p, &hs, "https://h.example:443/in/src_1", body)).unwrap();
        assert_eq!(a, b);
        let other = b"MessageSid=SM1&MessageStatus=delivered";
        assert_ne!(a, key(&request(&p, &hs, "https://h.example/in/src_1", other)).unwrap());
    }

    #[test]
    fn the_url_is_tried_with_and_without_its_default_port() {
        let signed = "https://mycompany.com:443/in/src_1";
        let sig = STANDARD.encode(mac(Hash::Sha1, b"t", &[signed.as_bytes()]));
        let headers = h(&[(NAME, &sig)]);
        let p = Provider::Twilio;
        assert_eq!(check(&request(&p, &headers, "https://mycompany.com/in/src_1", b""), &s("t")), Ok(()));
    }
}
