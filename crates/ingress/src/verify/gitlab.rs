//! GitLab: `X-Gitlab-Token` must equal the webhook's secret token (constant-time).
//! `Idempotency-Key` (the same on every retry, GitLab 17.4+) or else
//! `X-Gitlab-Event-UUID` is the event's id; the body's `object_kind` its type.

use super::scheme::header;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};
use crate::key::{KeyKind, KeyMissing};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Custom(key),
    event_type: TypeRule::Custom(event_type),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const NAME: &str = "x-gitlab-token";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let token = header(req.headers, NAME)?;
    if secrets.iter().any(|s| hookgate_shared::crypto::secrets_equal(s.as_bytes(), token.as_bytes())) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(NAME.into()))
    }
}

fn key(req: &Request) -> Result<(KeyKind, Vec<u8>), KeyMissing> {
    header(req.headers, "idempotency-key")
        .or_else(|_| header(req.headers, "x-gitlab-event-uuid"))
        .map(|v| (KeyKind::Provider, v.as_bytes().to_vec()))
        .map_err(|_| KeyMissing("header `Idempotency-Key` (or `X-Gitlab-Event-UUID`) is missing".into()))
}

fn event_type(req: &Request) -> Option<String> {
    super::scheme::json_field(req.body, "/object_kind").or_else(|| req.headers.get("x-gitlab-event").map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn the_token_must_match_and_the_retry_key_wins() {
        let p = Provider::Gitlab;
        let hs = h(&[(NAME, "tok"), ("idempotency-key", "k1"), ("x-gitlab-event-uuid", "u1")]);
        assert_eq!(check(&req(&p, &hs, b"{}", 0), &s("tok")), Ok(()));
        assert!(check(&req(&p, &hs, b"{}", 0), &s("tok2")).is_err());
        assert_eq!(key(&req(&p, &hs, b"{}", 0)).unwrap().1, b"k1");
        let old = h(&[("x-gitlab-event-uuid", "u1"), ("x-gitlab-event", "Push Hook")]);
        assert_eq!(key(&req(&p, &old, b"{}", 0)).unwrap().1, b"u1");
        assert_eq!(event_type(&req(&p, &old, br#"{"object_kind":"push"}"#, 0)).as_deref(), Some("push"));
        assert_eq!(event_type(&req(&p, &old, b"x", 0)).as_deref(), Some("Push Hook"));
    }
}
