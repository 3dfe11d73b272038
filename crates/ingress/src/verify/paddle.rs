//! Paddle Billing: `Paddle-Signature: ts=<ts>;h1=<hex HMAC-SHA256(secret,
//! "ts:body")>` (several `h1` while a secret rotates); the body's `event_id` is the
//! event's id, `event_type` its type.

use super::scheme::{TimestampedList, TOLERANCE_SECS};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const NAME: &str = "paddle-signature";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let list = TimestampedList {
        header: NAME,
        separator: ';',
        ts_name: "ts",
        sig_name: "h1",
        joiner: b":",
        tolerance: TOLERANCE_SECS,
    };
    list.check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::scheme::{mac, Hash};
    use super::super::Provider;
    use super::*;

    #[test]
    fn paddles_published_example_verifies() {
        // paddle-python-sdk's tests/Unit/Notification/test_Verifier.py.
        let secret = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh";
        let headers =
            h(&[(NAME, "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02")]);
        let p = Provider::Paddle;
        assert_eq!(check(&req(&p, &headers, b"hello-world", 1696195954), &s(secret)), Ok(()));
        assert!(check(&req(&p, &headers, b"hello-world!", 1696195954), &s(secret)).is_err());
    }

    #[test]
    fn paddle_signs_timestamp_and_body_and_any_h1_may_match() {
        let sig = hex::encode(mac(Hash::Sha256, b"pdl_ntfset_key", &[b"1671552777:", b"{}"]));
        let headers = h(&[(NAME, &format!("ts=1671552777;h1=00;h1={sig}"))]);
        let p = Provider::Paddle;
        assert_eq!(check(&req(&p, &headers, b"{}", 1671552777), &s("pdl_ntfset_key")), Ok(()));
        assert!(matches!(
            check(&req(&p, &headers, b"{}", 1671553777), &s("pdl_ntfset_key")),
            Err(VerifyError::Timestamp(_))
        ));
        assert!(matches!(
            check(&req(&p, &headers, b"[]", 1671552777), &s("pdl_ntfset_key")),
            Err(VerifyError::Mismatch(_))
        ));
    }
}
