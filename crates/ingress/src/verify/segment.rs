//! Segment (the Webhooks destination): `X-Signature: <hex HMAC-SHA1(shared secret,
//! body)>`, sent when a shared secret is set; `messageId` is the event's id,
//! `type` (`track`, `identify`) its type.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/messageId"),
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-signature", hash: Hash::Sha1, encoding: Encoding::Hex, prefix: None }.check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::mac;
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn segment_signs_the_body_with_hmac_sha1() {
        let body = br#"{"messageId":"m1","type":"track","event":"Signed Up"}"#;
        let sig = hex::encode(mac(Hash::Sha1, b"seg", &[body]));
        let p = Provider::Segment;
        assert_eq!(check(&req(&p, &h(&[("x-signature", &sig)]), body, 0), &s("seg")), Ok(()));
        assert!(matches!(
            check(&req(&p, &h(&[("x-signature", &sig)]), body, 0), &s("x")),
            Err(VerifyError::Mismatch(_))
        ));
    }
}
