//! Merge: `X-Merge-Webhook-Signature: <base64url HMAC-SHA256(signature key, body)>`
//! (padded or not); no event id (the body is the key), `hook.event` the type.

use base64::{
    engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD},
    Engine,
};

use super::scheme::{any_matches, header, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/hook/event"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-merge-webhook-signature";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let value = header(req.headers, SIG)?;
    let sig = URL_SAFE
        .decode(value)
        .or_else(|_| URL_SAFE_NO_PAD.decode(value))
        .map_err(|_| VerifyError::Malformed(SIG.into()))?;
    if any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &[req.body])) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(SIG.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn merge_signs_the_body_in_base64url_padded_or_not() {
        let body = br#"{"hook":{"event":"Employee.created"}}"#;
        let raw = mac(Hash::Sha256, b"mk", &[body]);
        let p = Provider::Merge;
        for sig in [URL_SAFE.encode(&raw), URL_SAFE_NO_PAD.encode(&raw)] {
            assert_eq!(check(&req(&p, &h(&[(SIG, &sig)]), body, 0), &s("mk")), Ok(()));
        }
        let sig = URL_SAFE.encode(&raw);
        assert!(matches!(check(&req(&p, &h(&[(SIG, &sig)]), b"{}", 0), &s("mk")), Err(VerifyError::Mismatch(_))));
    }
}
