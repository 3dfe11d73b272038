//! Discord: `X-Signature-Ed25519`, hex Ed25519 signature over
//! `X-Signature-Timestamp` + body, checked with the application's public key (hex).
//! A PING (an interaction of type 1, or a webhook event of type 0) is answered
//! after its signature is checked, admitting nothing: Discord sends them to
//! confirm the URL, and bad signatures to confirm it refuses them.

use serde_json::Value;

use super::scheme::header;
use super::{Check, DoorRules, Handshake, HandshakeBody, KeyRule, Preset, Request, TypeRule, VerifyError};
use crate::key::{KeyKind, KeyMissing};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Custom(key),
    event_type: TypeRule::Custom(event_type),
    handshake: Some(handshake),
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-signature-ed25519";
const TS: &str = "x-signature-timestamp";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = hex::decode(header(req.headers, SIG)?).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let ts = header(req.headers, TS)?;
    let signed = [ts.as_bytes(), req.body].concat();
    let ok =
        secrets.iter().filter_map(|k| hex::decode(k.trim()).ok()).filter(|k| super::scheme::ed25519_key_ok(k)).any(
            |pk| ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, pk).verify(&signed, &sig).is_ok(),
        );
    if ok {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(SIG.into()))
    }
}

fn doc(req: &Request) -> Option<Value> {
    serde_json::from_slice(req.body).ok()
}

/// An interaction's `id`; webhook events carry none, so their body is the key.
fn key(req: &Request) -> Result<(KeyKind, Vec<u8>), KeyMissing> {
    match doc(req).as_ref().and_then(|d| d.get("id")).and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok((KeyKind::Provider, id.as_bytes().to_vec())),
        _ => Ok((KeyKind::Body, req.body.to_vec())),
    }
}

/// A webhook event's `event.type` (`APPLICATION_AUTHORIZED`), or `interaction.<type>`.
fn event_type(req: &Request) -> Option<String> {
    let d = doc(req)?;
    if let Some(t) = d.pointer("/event/type").and_then(Value::as_str) {
        return Some(t.to_owned());
    }
    d.get("type").and_then(Value::as_i64).map(|t| format!("interaction.{t}"))
}

fn handshake(req: &Request, _: &[String]) -> Option<Handshake> {
    let d = doc(req)?;
    let kind = d.get("type")?.as_i64()?;
    // Interactions carry `version` too; only webhook events carry `event`.
    let is_event = d.get("event").is_some();
    match (kind, is_event) {
        // Webhook events: type 0 is PING, answered 204.
        (0, _) => Some(Handshake { status: 204, body: None }),
        // Interactions: type 1 is PING, answered with a PONG.
        (1, false) => Some(Handshake { status: 200, body: Some(HandshakeBody::Pong { kind: 1 }) }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use ring::signature::{Ed25519KeyPair, KeyPair};

    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn discord_checks_the_ed25519_signature_and_answers_pings() {
        let pair = Ed25519KeyPair::from_seed_unchecked(&[1; 32]).unwrap();
        let pk = hex::encode(pair.public_key().as_ref());
        let body = br#"{"id":"1","application_id":"2","type":1,"token":"t","version":1}"#;
        let sig = hex::encode(pair.sign(&[b"1700000000".as_slice(), body].concat()).as_ref());
        let headers = h(&[(SIG, &sig), (TS, "1700000000")]);
        let p = Provider::Discord;
        assert_eq!(check(&req(&p, &headers, body, 0), &s(&pk)), Ok(()));
        assert!(check(&req(&p, &headers, b"{}", 0), &s(&pk)).is_err());
        let pong = handshake(&req(&p, &headers, body, 0), &[]).unwrap();
        assert_eq!(pong.body, Some(HandshakeBody::Pong { kind: 1 }));
        let event = br#"{"version":1,"application_id":"2","type":1,"event":{"type":"APPLICATION_AUTHORIZED"}}"#;
        assert_eq!(handshake(&req(&p, &headers, event, 0), &[]), None);
        assert_eq!(event_type(&req(&p, &headers, event, 0)).as_deref(), Some("APPLICATION_AUTHORIZED"));
        let ping = br#"{"version":1,"application_id":"2","type":0}"#;
        assert_eq!(handshake(&req(&p, &headers, ping, 0), &[]).map(|h| h.status), Some(204));
    }
}
