//! Meta (Facebook, Instagram, WhatsApp): `X-Hub-Signature-256: sha256=<hex
//! HMAC-SHA256(app secret, body)>` over the body as sent; no event id (the body
//! is the key), `object` the type. Its subscription check (`GET` with
//! `hub.verify_token`) is answered by `door::subscribe`.

use super::scheme::{BodyHmac, Hash};
use super::{Check, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/object"),
    handshake: None,
    unsigned_ping: None,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-hub-signature-256", hash: Hash::Sha256, encoding: Encoding::Hex, prefix: Some("sha256=") }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::mac;
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn meta_signs_the_body_with_the_app_secret() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let sig = format!("sha256={}", hex::encode(mac(Hash::Sha256, b"app-secret", &[body])));
        let p = Provider::Meta;
        assert_eq!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), body, 0), &s("app-secret")), Ok(()));
        assert!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), b"{}", 0), &s("app-secret")).is_err());
    }
}
