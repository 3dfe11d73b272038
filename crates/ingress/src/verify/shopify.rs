//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, body)>`;
//! `X-Shopify-Webhook-Id` is the event's id, `X-Shopify-Topic` its type.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Header("X-Shopify-Webhook-Id"),
    event_type: TypeRule::Header("x-shopify-topic"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-shopify-hmac-sha256", hash: Hash::Sha256, encoding: Encoding::Base64, prefix: None }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use base64::{engine::general_purpose::STANDARD, Engine};

    use super::super::scheme::{
        mac,
        testing::{h, req},
    };
    use super::super::Provider;
    use super::*;

    #[test]
    fn any_valid_secret_of_a_rotation_is_accepted() {
        let sig = STANDARD.encode(mac(Hash::Sha256, b"old", &[b"body"]));
        let headers = h(&[("x-shopify-hmac-sha256", &sig)]);
        let p = Provider::Shopify;
        assert_eq!(check(&req(&p, &headers, b"body", 0), &["new".into(), "old".into()]), Ok(()));
        assert!(check(&req(&p, &headers, b"body", 0), &["new".into()]).is_err());
    }
}
