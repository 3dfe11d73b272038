//! Intercom: `X-Hub-Signature: sha1=<hex HMAC-SHA1(client secret, body)>`; the
//! notification's `id` is the event's id, its `topic` the type.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/id"),
    event_type: TypeRule::Pointer("/topic"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-hub-signature", hash: Hash::Sha1, encoding: Encoding::Hex, prefix: Some("sha1=") }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn intercom_signs_the_body_with_sha1() {
        // HMAC-SHA1("key", "The quick brown fox jumps over the lazy dog"), the
        // well-known value from RFC 2104's Wikipedia examples.
        let body = b"The quick brown fox jumps over the lazy dog";
        let p = Provider::Intercom;
        let hs = h(&[("x-hub-signature", "sha1=de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9")]);
        assert_eq!(check(&req(&p, &hs, body, 0), &s("key")), Ok(()));
        assert!(check(&req(&p, &hs, b"the quick brown fox jumps over the lazy dog", 0), &s("key")).is_err());
    }
}
