//! Bitbucket Cloud: `X-Hub-Signature: sha256=<hex HMAC-SHA256(secret, body)>`;
//! `X-Event-Key` (`repo:push`) is the type. The body is the key: the scheme signs
//! no time, so an unsigned id header (`X-Request-UUID`) would let a captured
//! request be replayed as new events.

use super::scheme::{BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Header("x-event-key"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-hub-signature", hash: Hash::Sha256, encoding: Encoding::Hex, prefix: Some("sha256=") }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::{
        mac,
        testing::{h, req, s},
    };
    use super::super::Provider;
    use super::*;

    #[test]
    fn bitbucket_signs_the_body_with_sha256() {
        let sig = format!("sha256={}", hex::encode(mac(Hash::Sha256, b"bb", &[b"{\"push\":{}}"])));
        let p = Provider::Bitbucket;
        let hs = h(&[("x-hub-signature", &sig)]);
        assert_eq!(check(&req(&p, &hs, b"{\"push\":{}}", 0), &s("bb")), Ok(()));
        assert!(check(&req(&p, &hs, b"{\"push\":[]}", 0), &s("bb")).is_err());
    }
}
