//! SendGrid's signed Event Webhook: `X-Twilio-Email-Event-Webhook-Signature`, a
//! base64 DER ECDSA P-256 signature over SHA-256 of timestamp + body, checked
//! with the verification key SendGrid shows (base64 DER public key). A request is
//! a batch of events with no id of its own: the body is the key.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::header;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/0/event"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-twilio-email-event-webhook-signature";
const TS: &str = "x-twilio-email-event-webhook-timestamp";

/// The DER prefix of a P-256 public key in SubjectPublicKeyInfo form; the 65 bytes
/// after it are the uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The uncompressed point of a base64 DER P-256 public key; `None` if it is not one.
pub fn p256_point(key: &str) -> Option<Vec<u8>> {
    let der = STANDARD.decode(key.trim()).ok()?;
    let point = der.strip_prefix(&P256_SPKI_PREFIX[..])?;
    (point.len() == 65 && point[0] == 0x04).then(|| point.to_vec())
}

/// Whether a base64 DER key is a P-256 public key whose point lies on the curve:
/// checked when a tenant gives it, so a key that could verify nothing is refused
/// rather than failing every request. (ECDH with a throwaway key is the check
/// ring offers: it refuses a point off the curve.)
pub fn p256_key_ok(key: &str) -> bool {
    use ring::agreement::{agree_ephemeral, EphemeralPrivateKey, UnparsedPublicKey, ECDH_P256};
    let Some(point) = p256_point(key) else { return false };
    let rng = ring::rand::SystemRandom::new();
    let Ok(mine) = EphemeralPrivateKey::generate(&ECDH_P256, &rng) else { return false };
    agree_ephemeral(mine, &UnparsedPublicKey::new(&ECDH_P256, point), |_| ()).is_ok()
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, SIG)?).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let ts = header(req.headers, TS)?;
    let signed = [ts.as_bytes(), req.body].concat();
    let ok = secrets.iter().filter_map(|k| p256_point(k)).any(|point| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, point)
            .verify(&signed, &sig)
            .is_ok()
    });
    if ok {
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
    fn a_p256_signature_over_timestamp_and_body_verifies_with_the_public_key() {
        use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let key = STANDARD.encode([&P256_SPKI_PREFIX[..], pair.public_key().as_ref()].concat());
        let body = br#"[{"email":"a@example.com","event":"delivered","sg_event_id":"e1"}]"#;
        let sig = STANDARD.encode(pair.sign(&rng, &[b"1588788367".as_slice(), body].concat()).unwrap());
        let headers = h(&[(SIG, &sig), (TS, "1588788367")]);
        let p = Provider::Sendgrid;
        assert_eq!(check(&req(&p, &headers, body, 0), &s(&key)), Ok(()));
        assert!(check(&req(&p, &headers, b"[]", 0), &s(&key)).is_err());
        let late = h(&[(SIG, &sig), (TS, "1588788368")]);
        assert!(check(&req(&p, &late, body, 0), &s(&key)).is_err(), "the timestamp is signed");
        assert_eq!(p256_point("AAAA"), None);
        assert!(p256_key_ok(&key));
        let off_curve = STANDARD.encode([&P256_SPKI_PREFIX[..], &[4u8], &[0u8; 64]].concat());
        assert!(p256_point(&off_curve).is_some() && !p256_key_ok(&off_curve), "the shape alone is not enough");
    }
}
