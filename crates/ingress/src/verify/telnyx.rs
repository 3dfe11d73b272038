//! Telnyx: `telnyx-signature-ed25519`, base64 Ed25519 signature over
//! `<telnyx-timestamp>|<body>`, checked with the account's public key (base64 of
//! 32 bytes) within five minutes, as Telnyx's SDK checks; `data.id` is the
//! event's id, `data.event_type` its type.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::{check_timestamp, header};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError, TOLERANCE_SECS};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/data/id"),
    event_type: TypeRule::Pointer("/data/event_type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "telnyx-signature-ed25519";
const TS: &str = "telnyx-timestamp";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, SIG)?.trim()).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let ts_text = header(req.headers, TS)?.trim();
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(TS.into()))?;
    let signed = [ts_text.as_bytes(), b"|", req.body].concat();
    let ok =
        secrets.iter().filter_map(|k| STANDARD.decode(k.trim()).ok()).filter(|k| super::scheme::ed25519_key_ok(k)).any(
            |pk| ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, pk).verify(&signed, &sig).is_ok(),
        );
    if !ok {
        return Err(VerifyError::Mismatch(SIG.into()));
    }
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use ring::signature::{Ed25519KeyPair, KeyPair};

    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn telnyx_checks_the_ed25519_signature_over_timestamp_and_body_then_the_time() {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let public = STANDARD.encode(pair.public_key().as_ref());
        let body = br#"{"data":{"id":"e1","event_type":"call.initiated"}}"#;
        let sig = STANDARD.encode(pair.sign(&[b"1700000000|".as_slice(), body].concat()).as_ref());
        let hs = h(&[(SIG, &sig), (TS, "1700000000")]);
        let p = Provider::Telnyx;
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_100), &s(&public)), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_400), &s(&public)), Err(VerifyError::Timestamp(TOLERANCE_SECS)));
        let other = h(&[(SIG, &sig), (TS, "1700000001")]);
        assert!(matches!(check(&req(&p, &other, body, 1_700_000_100), &s(&public)), Err(VerifyError::Mismatch(_))));
        assert!(matches!(check(&req(&p, &hs, b"{}", 1_700_000_100), &s(&public)), Err(VerifyError::Mismatch(_))));
    }
}
