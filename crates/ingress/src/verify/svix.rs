//! Svix-signed senders (Clerk, Resend and every Svix customer): Standard Webhooks
//! under `svix-id`, `svix-timestamp` and `svix-signature`, with a `whsec_` secret.

use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Header("svix-id"),
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    super::standard::signed(req, secrets, "svix")
}

#[cfg(test)]
mod tests {
    use base64::{engine::general_purpose::STANDARD, Engine};

    use super::super::scheme::{
        mac,
        testing::{h, req, s},
        Hash,
    };
    use super::super::Provider;
    use super::*;

    #[test]
    fn svixs_published_example_verifies() {
        // The Svix SDKs' signing test (svix-php `testSignFunctionWorks`, and others).
        let headers = h(&[
            ("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("svix-timestamp", "1614265330"),
            ("svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
        ]);
        let p = Provider::Svix;
        let secret = s("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert_eq!(check(&req(&p, &headers, br#"{"test": 2432232314}"#, 1614265330), &secret), Ok(()));
        assert!(check(&req(&p, &headers, br#"{"test": 2432232315}"#, 1614265330), &secret).is_err());
    }

    #[test]
    fn svix_headers_carry_a_standard_webhooks_signature() {
        let key = [3u8; 24];
        let secret = format!("whsec_{}", STANDARD.encode(key));
        let sig = STANDARD.encode(mac(Hash::Sha256, &key, &[b"msg_2.1000.{\"a\":1}"]));
        let headers = h(&[("svix-id", "msg_2"), ("svix-timestamp", "1000"), ("svix-signature", &format!("v1,{sig}"))]);
        let p = Provider::Svix;
        assert_eq!(check(&req(&p, &headers, br#"{"a":1}"#, 1000), &s(&secret)), Ok(()));
        assert!(check(&req(&p, &headers, br#"{"a":2}"#, 1000), &s(&secret)).is_err());
        let webhook_names = h(&[("webhook-id", "msg_2"), ("webhook-timestamp", "1000"), ("webhook-signature", &sig)]);
        assert!(matches!(
            check(&req(&p, &webhook_names, br#"{"a":1}"#, 1000), &s(&secret)),
            Err(VerifyError::MissingHeader(_))
        ));
    }
}
