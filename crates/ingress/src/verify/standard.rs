//! Standard Webhooks: `webhook-id`, `webhook-timestamp` and `webhook-signature`
//! over `id.ts.body`, symmetric (`v1,` HMAC-SHA256 keyed by a `whsec_` secret) or
//! asymmetric (`v1a,` Ed25519, checked with a `whpk_` public key). Svix signs the
//! same way under `svix-` header names (`svix.rs`).

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::{check_timestamp, ct_eq, header, mac, Hash, TOLERANCE_SECS};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Header("webhook-id"),
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    signed(req, secrets, "webhook")
}

/// Checks the three `{prefix}-*` headers against any secret or public key.
pub fn signed(req: &Request, secrets: &[String], prefix: &str) -> Result<(), VerifyError> {
    let (id_h, ts_h, sig_h) = (format!("{prefix}-id"), format!("{prefix}-timestamp"), format!("{prefix}-signature"));
    let id = header(req.headers, &id_h)?;
    let ts_text = header(req.headers, &ts_h)?;
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(ts_h.clone()))?;
    let mut symmetric = Vec::new();
    let mut asymmetric = Vec::new();
    for sig in header(req.headers, &sig_h)?.split(' ') {
        if let Some(b) = sig.strip_prefix("v1,") {
            symmetric.extend(STANDARD.decode(b).ok());
        } else if let Some(b) = sig.strip_prefix("v1a,") {
            asymmetric.extend(STANDARD.decode(b).ok());
        }
    }
    if symmetric.is_empty() && asymmetric.is_empty() {
        return Err(VerifyError::Malformed(sig_h));
    }
    let signed = [id.as_bytes(), b".", ts_text.as_bytes(), b".", req.body].concat();
    let ok = secrets.iter().any(|s| {
        if let Some(pk) = s.strip_prefix("whpk_") {
            let Ok(pk) = STANDARD.decode(pk) else { return false };
            if !super::scheme::ed25519_key_ok(&pk) {
                return false;
            }
            let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, pk);
            asymmetric.iter().any(|sig| key.verify(&signed, sig).is_ok())
        } else {
            // A secret that is not base64 (never stored: checked when written) matches
            // nothing, rather than keying the HMAC with nothing.
            let Ok(key) = hookgate_shared::whsec::key_bytes(s) else { return false };
            if key.is_empty() {
                return false;
            }
            let expected = mac(Hash::Sha256, &key, &[&signed]);
            symmetric.iter().any(|sig| ct_eq(&expected, sig))
        }
    });
    if !ok {
        return Err(VerifyError::Mismatch(sig_h));
    }
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req};
    use super::super::Provider;
    use super::*;

    #[derive(serde::Deserialize)]
    struct Vector {
        secret: String,
        msg_id: String,
        timestamp: i64,
        payload: String,
        signature: String,
    }

    #[test]
    fn standard_webhooks_vectors_verify_and_fail_outside_tolerance() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/standard-webhooks-vectors.json");
        let vectors: Vec<Vector> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let p = Provider::StandardWebhooks;
        for v in vectors {
            let ts = v.timestamp.to_string();
            let sig = format!("v1,bogus {}", v.signature);
            let headers = h(&[("webhook-id", &v.msg_id), ("webhook-timestamp", &ts), ("webhook-signature", &sig)]);
            let secret = std::slice::from_ref(&v.secret);
            assert_eq!(check(&req(&p, &headers, v.payload.as_bytes(), v.timestamp + 10), secret), Ok(()));
            assert_eq!(
                check(&req(&p, &headers, v.payload.as_bytes(), v.timestamp + 301), secret),
                Err(VerifyError::Timestamp(300))
            );
            assert!(matches!(
                check(&req(&p, &headers, b"tampered", v.timestamp), secret),
                Err(VerifyError::Mismatch(_))
            ));
        }
    }

    #[test]
    fn the_asymmetric_form_verifies_with_the_public_key_only() {
        use ring::signature::{Ed25519KeyPair, KeyPair};
        let pair = Ed25519KeyPair::from_seed_unchecked(&[7; 32]).unwrap();
        let whpk = format!("whpk_{}", STANDARD.encode(pair.public_key().as_ref()));
        let sig = STANDARD.encode(pair.sign(b"msg_1.1000.{}").as_ref());
        let headers = h(&[
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", "1000"),
            ("webhook-signature", &format!("v1,AAAA v1a,{sig}")),
        ]);
        let p = Provider::StandardWebhooks;
        assert_eq!(check(&req(&p, &headers, b"{}", 1000), std::slice::from_ref(&whpk)), Ok(()));
        assert!(matches!(check(&req(&p, &headers, b"{ }", 1000), &[whpk]), Err(VerifyError::Mismatch(_))));
        // A `v1a` signature is never checked as an HMAC, nor a `v1` one with a public key.
        // A small-order key (here the identity) would verify a forged signature for
        // any message: it is never used.
        let identity = [[1u8].as_slice(), &[0u8; 31]].concat();
        assert!(!crate::verify::ed25519_key_ok(&identity) && !crate::verify::ed25519_key_ok(&[0u8; 32]));
        let forged_sig = STANDARD.encode([identity.as_slice(), &[0u8; 32]].concat());
        let forged = h(&[
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", "1000"),
            ("webhook-signature", &format!("v1a,{forged_sig}")),
        ]);
        let weak = format!("whpk_{}", STANDARD.encode(&identity));
        assert!(check(&req(&p, &forged, b"anything", 1000), &[weak]).is_err());
        assert!(crate::verify::ed25519_key_ok(pair.public_key().as_ref()));
        let other = format!("whpk_{}", STANDARD.encode([9u8; 32]));
        assert!(check(&req(&p, &headers, b"{}", 1000), &[other, "whsec_AAAA".into()]).is_err());
    }
}
