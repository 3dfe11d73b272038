//! Postmark and any sender that authenticates with `Authorization: Basic`: the
//! credentials must equal the source's `user:password`, compared in constant
//! time. Such senders sign nothing, so the body is the key.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::header;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::None,
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const NAME: &str = "authorization";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let value = header(req.headers, NAME)?;
    let (scheme, encoded) = value.split_once(' ').ok_or_else(|| VerifyError::Malformed(NAME.into()))?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(VerifyError::Malformed(NAME.into()));
    }
    let given = STANDARD.decode(encoded.trim()).map_err(|_| VerifyError::Malformed(NAME.into()))?;
    if secrets.iter().any(|s| hookgate_shared::crypto::secrets_equal(s.as_bytes(), &given)) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(NAME.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn only_the_configured_credentials_pass() {
        let p = Provider::BasicAuth;
        let ok = h(&[("authorization", &format!("Basic {}", STANDARD.encode("postmark:pw")))]);
        assert_eq!(check(&req(&p, &ok, b"{}", 0), &s("postmark:pw")), Ok(()));
        let wrong = h(&[("authorization", &format!("Basic {}", STANDARD.encode("postmark:px")))]);
        assert!(matches!(check(&req(&p, &wrong, b"{}", 0), &s("postmark:pw")), Err(VerifyError::Mismatch(_))));
        let bearer = h(&[("authorization", "Bearer postmark:pw")]);
        assert!(matches!(check(&req(&p, &bearer, b"{}", 0), &s("postmark:pw")), Err(VerifyError::Malformed(_))));
    }
}
