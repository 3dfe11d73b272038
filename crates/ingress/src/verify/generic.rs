//! The generic `hmac` provider (a header the tenant names, SHA-256 or SHA-512, hex
//! or base64, an optional prefix) and `none`; neither has a stable id, so the
//! body is the key unless the source sets one.

use super::scheme::BodyHmac;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::None,
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

/// Provider `none`: nothing is checked (only with the source's explicit flag).
pub const NONE: Preset = Preset {
    check: Check::Nothing,
    key: KeyRule::Body,
    event_type: TypeRule::None,
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let Some(spec) = req.provider.hmac() else { return Err(VerifyError::Malformed("hmac".into())) };
    BodyHmac {
        header: &spec.header,
        hash: spec.algorithm.into(),
        encoding: spec.encoding,
        prefix: spec.prefix.as_deref(),
    }
    .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::{
        mac,
        testing::{h, req, s},
        Hash,
    };
    use super::super::{Algorithm, Encoding, HmacSpec, Provider};
    use super::*;

    #[test]
    fn the_generic_hmac_honours_algorithm_encoding_and_prefix() {
        let p = Provider::Hmac(HmacSpec {
            header: "X-Sig".into(),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Hex,
            prefix: Some("v=".into()),
        });
        let sig = format!("v={}", hex::encode(mac(Hash::Sha512, b"k", &[b"b"])));
        assert_eq!(check(&req(&p, &h(&[("x-sig", &sig)]), b"b", 0), &s("k")), Ok(()));
        let no_prefix = hex::encode(mac(Hash::Sha512, b"k", &[b"b"]));
        assert!(matches!(
            check(&req(&p, &h(&[("x-sig", &no_prefix)]), b"b", 0), &s("k")),
            Err(VerifyError::Malformed(_))
        ));
    }
}
