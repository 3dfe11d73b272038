//! Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:ts:body")>` with
//! `X-Slack-Request-Timestamp`; the Events API's `url_verification` challenge is
//! answered, after its signature is checked, without admitting anything.

use serde_json::Value;

use super::scheme::v0_signed;
use super::{Check, DoorRules, Handshake, HandshakeBody, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Custom(event_type),
    handshake: Some(handshake),
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    v0_signed(req, secrets, "x-slack-request-timestamp", "x-slack-signature")
}

fn event_type(req: &Request) -> Option<String> {
    let doc: Value = serde_json::from_slice(req.body).ok()?;
    doc.pointer("/event/type").or_else(|| doc.pointer("/type")).and_then(Value::as_str).map(str::to_owned)
}

/// `{"type": "url_verification", "challenge": …}` is answered with the challenge.
fn handshake(req: &Request, _: &[String]) -> Option<Handshake> {
    let doc: Value = serde_json::from_slice(req.body).ok()?;
    if doc.get("type")?.as_str()? != "url_verification" {
        return None;
    }
    let challenge = doc.get("challenge")?.as_str()?;
    Some(Handshake { status: 200, body: Some(HandshakeBody::Challenge { challenge: challenge.to_owned() }) })
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::scheme::{mac, Hash};
    use super::super::Provider;
    use super::*;

    #[test]
    fn slack_signs_version_timestamp_and_body() {
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let sig = hex::encode(mac(Hash::Sha256, secret.as_bytes(), &[b"v0:1531420618:", b"token=x"]));
        let headers = h(&[("x-slack-request-timestamp", "1531420618"), ("x-slack-signature", &format!("v0={sig}"))]);
        let p = Provider::Slack;
        assert_eq!(check(&req(&p, &headers, b"token=x", 1531420618), &s(secret)), Ok(()));
        assert!(check(&req(&p, &headers, b"token=y", 1531420618), &s(secret)).is_err());
    }

    #[test]
    fn the_url_verification_challenge_is_echoed() {
        let body = br#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let p = Provider::Slack;
        let got = handshake(&req(&p, &h(&[]), body, 0), &[]).unwrap();
        assert_eq!(
            got.body,
            Some(HandshakeBody::Challenge { challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into() })
        );
        assert_eq!(handshake(&req(&p, &h(&[]), br#"{"type":"event_callback"}"#, 0), &[]), None);
    }
}
