//! Checkbook: `signature: nonce=<n>,signature=<hex HMAC-SHA256(key, body + nonce)>`;
//! no timestamp and no event id (a payment's updates share its `id`), so the body
//! is the key; `type` (`CHECK`, `INVOICE`) is the event type.

use super::scheme::{any_matches, header, mac, Hash};
use super::{Check, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
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

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let (nonce, sig) = parts(header(req.headers, SIG)?).ok_or_else(|| VerifyError::Malformed(SIG.into()))?;
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
}
