//! Checkbook: `signature: nonce=<n>,signature=<hex HMAC-SHA256(key, body + nonce)>`;
//! no timestamp and no event id (a payment's updates share its `id`), so the body
//! is the key; `type` (`CHECK`, `INVOICE`) is the event type.
//!
//! The MAC runs over `body‖nonce` with no separator, so the same signature holds
//! for every other split of those bytes: digits moved from the nonce to the end
//! of the body would make a body never seen before, hashed to a new key, and
//! admitted as a new event. A body must therefore be one whole JSON object and
//! the nonce plain text without spaces: an object ends where its last brace
//! closes, so the signed bytes split one way only.

use super::scheme::{any_matches, header, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "signature";

/// The header's `nonce` and `signature` parts.
fn parts(value: &str) -> Option<(&str, &str)> {
    let (mut nonce, mut sig) = (None, None);
    for part in value.split(',') {
        match part.trim().split_once('=') {
            Some(("nonce", v)) => nonce = Some(v),
            Some(("signature", v)) => sig = Some(v),
            _ => {}
        }
    }
    Some((nonce?, sig?))
}

/// Why a request's signed bytes could be split another way.
const NOT_ONE_OBJECT: &str = "a Checkbook body must be one JSON object: its signature covers the body and the nonce with nothing between them, so anything after the object would be signed as part of the nonce";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let (nonce, sig) = parts(header(req.headers, SIG)?).ok_or_else(|| VerifyError::Malformed(SIG.into()))?;
    if nonce.is_empty() || nonce.bytes().any(|b| b.is_ascii_whitespace()) {
        return Err(VerifyError::Malformed(SIG.into()));
    }
    // Parsed whole (trailing whitespace aside): the split between body and nonce is then the only one.
    if !serde_json::from_slice::<serde_json::Value>(req.body).is_ok_and(|v| v.is_object()) {
        return Err(VerifyError::Ambiguous(NOT_ONE_OBJECT));
    }
    let presented = hex::decode(sig).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    if any_matches(secrets, &[presented], |k| mac(Hash::Sha256, k.as_bytes(), &[req.body, nonce.as_bytes()])) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(SIG.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn checkbook_matches_its_documented_example() {
        // docs.checkbook.io, "Webhooks": the published body, nonce, key and signature.
        let body = br#"{"status": "PAID", "id": "ed0af5fb335c47dd8eb53199ba50f5c4", "type": "CHECK"}"#;
        let value = "nonce=1243549809,signature=4ee9758fc0bceb3ca1a2fe397fbd125364cfffdb04296fa118dab9778a4b3ce3";
        let hs = h(&[(SIG, value)]);
        let p = Provider::Checkbook;
        assert_eq!(check(&req(&p, &hs, body, 0), &s("335b5728e25b47e88995fce207bff380")), Ok(()));
        assert!(matches!(check(&req(&p, &hs, body, 0), &s("another-key")), Err(VerifyError::Mismatch(_))));
        let other_nonce = h(&[(SIG, &value.replace("1243549809", "1243549808"))]);
        assert!(check(&req(&p, &other_nonce, body, 0), &s("335b5728e25b47e88995fce207bff380")).is_err());
        assert!(matches!(check(&req(&p, &h(&[(SIG, "nonce=1")]), body, 0), &s("k")), Err(VerifyError::Malformed(_))));
    }

    #[test]
    fn digits_moved_from_the_nonce_to_the_body_do_not_make_a_new_event_under_the_same_signature() {
        let key = "335b5728e25b47e88995fce207bff380";
        let body = br#"{"status": "PAID", "id": "ed0af5fb335c47dd8eb53199ba50f5c4", "type": "CHECK"}"#;
        let sig = "4ee9758fc0bceb3ca1a2fe397fbd125364cfffdb04296fa118dab9778a4b3ce3";
        let p = Provider::Checkbook;
        // The same signed bytes, split elsewhere: `…}1` and `243549809`, or `…} ` and a nonce.
        for (shifted_body, nonce) in [
            ([body.as_slice(), b"1"].concat(), "243549809"),
            ([body.as_slice(), b"12435"].concat(), "49809"),
            ([body.as_slice(), b"1243549809"].concat(), ""),
        ] {
            let hs = h(&[(SIG, &format!("nonce={nonce},signature={sig}"))]);
            let got = check(&req(&p, &hs, &shifted_body, 0), &s(key));
            assert!(got.is_err(), "{} with nonce `{nonce}` was taken", String::from_utf8_lossy(&shifted_body));
        }
        // A body that is not an object is refused whatever it is signed with, naming why.
        let number = b"12";
        let signed = mac(Hash::Sha256, key.as_bytes(), &[number, b"3"]);
        let hs = h(&[(SIG, &format!("nonce=3,signature={}", hex::encode(signed)))]);
        let got = check(&req(&p, &hs, number, 0), &s(key)).unwrap_err();
        assert!(got.to_string().contains("one JSON object"), "{got}");
        // Whitespace after the object is still the one split: the nonce may hold none.
        let spaced = mac(Hash::Sha256, key.as_bytes(), &[body, b"\n", b"77"]);
        let hs = h(&[(SIG, &format!("nonce=77,signature={}", hex::encode(&spaced)))]);
        assert_eq!(check(&req(&p, &hs, &[body.as_slice(), b"\n"].concat(), 0), &s(key)), Ok(()));
        let hs = h(&[(SIG, &format!("nonce=\n77,signature={}", hex::encode(&spaced)))]);
        assert!(check(&req(&p, &hs, body, 0), &s(key)).is_err(), "the whitespace moved into the nonce");
    }
}
