//! Zoom: `x-zm-signature: v0=<hex HMAC-SHA256(secret token, "v0:ts:body")>` with
//! `x-zm-request-timestamp`. Zoom's `endpoint.url_validation` challenge is
//! answered with `{plainToken, encryptedToken}` only after its own signature is
//! verified, and only for a token of Zoom's shape: answering any text would let
//! anyone have Hookgate sign what they chose. Zoom's events carry no id of their
//! own; the body (with its `event_ts`) is the key, `event` the type.

use serde_json::Value;

use super::scheme::{mac, v0_signed, Hash};
use super::{Check, DoorRules, Handshake, HandshakeBody, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/event"),
    handshake: Some(handshake),
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-zm-signature";
const TS: &str = "x-zm-request-timestamp";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    v0_signed(req, secrets, TS, SIG)
}

/// Answered with the current secret: Zoom validates with the token it shows now.
fn handshake(req: &Request, secrets: &[String]) -> Option<Handshake> {
    let doc: Value = serde_json::from_slice(req.body).ok()?;
    if doc.get("event")?.as_str()? != "endpoint.url_validation" {
        return None;
    }
    let plain = doc.pointer("/payload/plainToken")?.as_str()?;
    let shaped =
        (1..=64).contains(&plain.len()) && plain.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
    let secret = secrets.first()?;
    let answer = match shaped {
        true => {
            let encrypted_token = hex::encode(mac(Hash::Sha256, secret.as_bytes(), &[plain.as_bytes()]));
            HandshakeBody::Token { encrypted_token, plain_token: plain.to_owned() }
        }
        false => {
            return Some(Handshake {
                status: 400,
                body: Some(HandshakeBody::Refused { code: "bad_request", detail: "`plainToken` is not a Zoom token" }),
            })
        }
    };
    Some(Handshake { status: 200, body: Some(answer) })
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn zooms_url_validation_is_answered_with_the_encrypted_token() {
        let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
        let sig = format!("v0={}", hex::encode(mac(Hash::Sha256, b"zs", &[b"v0:1654503849:", body])));
        let hs = h(&[(SIG, &sig), (TS, "1654503849")]);
        let p = Provider::Zoom;
        let r = req(&p, &hs, body, 1654503849);
        assert_eq!(check(&r, &s("zs")), Ok(()));
        let answer = handshake(&r, &s("zs")).unwrap();
        let want = hex::encode(mac(Hash::Sha256, b"zs", &[b"qgg8vlvZRS6UYooatFL8Aw"]));
        assert!(matches!(answer.body, Some(HandshakeBody::Token { encrypted_token, .. }) if encrypted_token == want));
        let forged =
            br#"{"payload":{"plainToken":"v0:1654503849:{\"event\":\"x\"}"},"event":"endpoint.url_validation"}"#;
        assert_eq!(handshake(&req(&p, &hs, forged, 0), &s("zs")).unwrap().status, 400);
        assert!(check(&req(&p, &hs, b"{}", 1654503849), &s("zs")).is_err());
    }
}
