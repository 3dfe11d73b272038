//! Tailscale: `Tailscale-Webhook-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret,
//! "ts.body")>` (several `v1` possible), refused outside five minutes as
//! Tailscale's example does. Its body is a list of events with no id: the body is
//! the key.

use super::scheme::TimestampedList;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError, TOLERANCE_SECS};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/0/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let list = TimestampedList {
        header: "tailscale-webhook-signature",
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
    fn tailscale_signs_timestamp_and_body_within_five_minutes() {
        let body = br#"[{"type":"nodeCreated","tailnet":"example.com"}]"#;
        let sig = hex::encode(mac(Hash::Sha256, b"tskey-webhook-x", &[b"1700000000.", body]));
        let hs = h(&[("tailscale-webhook-signature", &format!("t=1700000000,v1=ffff,v1={sig}"))]);
        let p = Provider::Tailscale;
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_200), &s("tskey-webhook-x")), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_400), &s("tskey-webhook-x")), Err(VerifyError::Timestamp(300)));
        assert!(matches!(
            check(&req(&p, &hs, b"[]", 1_700_000_000), &s("tskey-webhook-x")),
            Err(VerifyError::Mismatch(_))
        ));
    }
}
