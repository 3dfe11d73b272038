//! Square: `x-square-hmacsha256-signature: <base64 HMAC-SHA256(signature key,
//! notification URL + body)>`, the URL being the source's `publicUrl`; the body's
//! `event_id` is the event's id, `type` its type.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::{any_matches, header, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const NAME: &str = "x-square-hmacsha256-signature";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, NAME)?).map_err(|_| VerifyError::Malformed(NAME.into()))?;
    if any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &[req.url.as_bytes(), req.body])) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(NAME.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn squares_published_example_verifies() {
        // The example of Square's SDKs' webhooks-helper tests (square-python, -node, -go, …).
        let url = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
        let body = br#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
        let headers = h(&[(NAME, "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=")]);
        let p = Provider::Square;
        let r = |u: &'static str| Request { provider: &p, headers: &headers, body, method: "POST", url: u, now: 0 };
        assert_eq!(check(&r(url), &s("Ibxx_5AKakO-3qeNVR61Dw")), Ok(()));
        assert!(check(&r("https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9/"), &s("Ibxx_5AKakO-3qeNVR61Dw"))
            .is_err());
    }

    #[test]
    fn the_notification_url_is_signed_with_the_body() {
        let url = "https://hooks.example.com/in/src_1";
        let body = br#"{"merchant_id":"M","type":"payment.updated","event_id":"e1"}"#;
        let sig = STANDARD.encode(mac(Hash::Sha256, b"sig-key", &[url.as_bytes(), body]));
        let headers = h(&[(NAME, &sig)]);
        let p = Provider::Square;
        let r = |u: &'static str, b: &'static [u8]| Request {
            provider: &p,
            headers: &headers,
            body: b,
            method: "POST",
            url: u,
            now: 0,
        };
        assert_eq!(check(&r("https://hooks.example.com/in/src_1", body), &s("sig-key")), Ok(()));
        assert!(check(&r("https://other.example.com/in/src_1", body), &s("sig-key")).is_err());
        assert!(check(&r("https://hooks.example.com/in/src_1", b"{}"), &s("sig-key")).is_err());
    }
}
