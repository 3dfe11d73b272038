//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`; the hook
//! and delivery ids together are the event's id, `X-GitHub-Event` its type.

use super::scheme::{header, BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};
use crate::key::{KeyKind, KeyMissing};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Custom(key),
    event_type: TypeRule::Header("x-github-event"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-hub-signature-256", hash: Hash::Sha256, encoding: Encoding::Hex, prefix: Some("sha256=") }
        .check(req, secrets)
}

/// The hook and delivery ids, as GitHub sends them (neither is signed: see
/// docs/receiving.md, "What a signature covers").
fn key(req: &Request) -> Result<(KeyKind, Vec<u8>), KeyMissing> {
    let get = |name: &str| header(req.headers, &name.to_ascii_lowercase()).map_err(|_| KeyMissing::header(name));
    Ok((KeyKind::Provider, format!("{}:{}", get("X-GitHub-Hook-ID")?, get("X-GitHub-Delivery")?).into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn github_accepts_its_documented_example_and_refuses_a_changed_body() {
        // GitHub's docs ("Validating webhook deliveries"): secret "It's a Secret to
        // Everybody", payload "Hello, World!", the signature below.
        let headers =
            h(&[("x-hub-signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")]);
        let p = Provider::Github;
        let secret = s("It's a Secret to Everybody");
        assert_eq!(check(&req(&p, &headers, b"Hello, World!", 0), &secret), Ok(()));
        assert!(matches!(check(&req(&p, &headers, b"Hello, World?", 0), &secret), Err(VerifyError::Mismatch(_))));
        assert!(matches!(check(&req(&p, &h(&[]), b"x", 0), &secret), Err(VerifyError::MissingHeader(_))));
    }
}
