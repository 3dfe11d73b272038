//! Calendly: `Calendly-Webhook-Signature: t=<ts>,v1=<hex HMAC-SHA256(signing key,
//! "ts.body")>`, refused outside three minutes as Calendly's guide does. Its
//! payloads carry no event id: the body is the key, `event` the type.

use super::scheme::TimestampedList;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/event"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const NAME: &str = "calendly-webhook-signature";
const TOLERANCE_SECS: i64 = 180;

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let list = TimestampedList {
        header: NAME,
        separator: ',',
        ts_name: "t",
        sig_name: "v1",
        joiner: b".",
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
    fn calendly_signs_timestamp_and_body_within_three_minutes() {
        let body = br#"{"event":"invitee.created","payload":{}}"#;
        let sig = hex::encode(mac(Hash::Sha256, b"ck", &[b"1700000000.", body]));
        let hs = h(&[(NAME, &format!("t=1700000000,v1={sig}"))]);
        let p = Provider::Calendly;
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_100), &s("ck")), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_200), &s("ck")), Err(VerifyError::Timestamp(180)));
        assert!(matches!(check(&req(&p, &hs, b"{}", 1_700_000_000), &s("ck")), Err(VerifyError::Mismatch(_))));
    }
}
