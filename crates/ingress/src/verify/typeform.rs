//! Typeform: `Typeform-Signature: sha256=<base64 HMAC-SHA256(secret, body)>`;
//! the body's `event_id` is the event's id, `event_type` its type.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "typeform-signature", hash: Hash::Sha256, encoding: Encoding::Base64, prefix: Some("sha256=") }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use base64::{engine::general_purpose::STANDARD, Engine};

    use super::super::scheme::{
        mac,
        testing::{h, req, s},
    };
    use super::super::Provider;
    use super::*;

    #[test]
    fn typeform_signs_the_body_in_base64() {
        let body = br#"{"event_id":"01H","event_type":"form_response"}"#;
        let sig = format!("sha256={}", STANDARD.encode(mac(Hash::Sha256, b"tf", &[body])));
        let p = Provider::Typeform;
        let hs = h(&[("typeform-signature", &sig)]);
        assert_eq!(check(&req(&p, &hs, body, 0), &s("tf")), Ok(()));
        let hex_form =
            h(&[("typeform-signature", &format!("sha256={}", hex::encode(mac(Hash::Sha256, b"tf", &[body]))))]);
        assert!(check(&req(&p, &hex_form, body, 0), &s("tf")).is_err());
    }
}
