//! WooCommerce: `X-WC-Webhook-Signature: <base64 HMAC-SHA256(secret, body)>`;
//! `X-WC-Webhook-Topic` (`order.created`) is the type. The body is the key:
//! `X-WC-Webhook-Delivery-ID` is one value per webhook per second (two orders in
//! one second would collide) and is not signed. When a webhook is saved, WooCommerce posts an
//! unsigned `webhook_id=<n>` ping and keeps the webhook only if it gets a 200: that
//! ping is answered and admits nothing.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Header("x-wc-webhook-topic"),
    handshake: None,
    unsigned_ping: Some(ping),
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-wc-webhook-signature", hash: Hash::Sha256, encoding: Encoding::Base64, prefix: None }
        .check(req, secrets)
}

/// Exactly `webhook_id=<digits>`, without a signature: nothing else passes as a ping.
fn ping(req: &Request) -> bool {
    req.headers.get("x-wc-webhook-signature").is_none()
        && std::str::from_utf8(req.body)
            .ok()
            .and_then(|b| b.strip_prefix("webhook_id="))
            .is_some_and(|n| !n.is_empty() && n.len() <= 20 && n.bytes().all(|c| c.is_ascii_digit()))
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
    fn woocommerce_signs_the_body_and_its_ping_is_recognised() {
        let body = br#"{"id":727,"status":"processing"}"#;
        let sig = STANDARD.encode(mac(Hash::Sha256, b"wc", &[body]));
        let p = Provider::Woocommerce;
        let hs = h(&[("x-wc-webhook-signature", &sig)]);
        assert_eq!(check(&req(&p, &hs, body, 0), &s("wc")), Ok(()));
        assert!(check(&req(&p, &hs, br#"{"id":728}"#, 0), &s("wc")).is_err());
        let none = h(&[]);
        assert!(ping(&req(&p, &none, b"webhook_id=12", 0)));
        assert!(!ping(&req(&p, &none, b"webhook_id=12&x=1", 0)));
        assert!(!ping(&req(&p, &hs, b"webhook_id=12", 0)));
    }
}
