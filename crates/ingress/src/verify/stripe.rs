//! Stripe: `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "ts.body")>[,v1=…]`;
//! the body's `id` is the event's, its `type` the event type.

use super::scheme::{any_matches, check_timestamp, header, mac, pairs, Hash, TOLERANCE_SECS};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/id"),
    event_type: TypeRule::Pointer("/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let name = "stripe-signature";
    let (ts, sigs) = pairs(header(req.headers, name)?, ',', "t", "v1");
    let ts = ts.and_then(|t| t.parse::<i64>().ok()).ok_or_else(|| VerifyError::Malformed(name.into()))?;
    let sigs: Vec<Vec<u8>> = sigs.iter().filter_map(|s| hex::decode(s).ok()).collect();
    if sigs.is_empty() {
        return Err(VerifyError::Malformed(name.into()));
    }
    let signed = ts.to_string();
    if !any_matches(secrets, &sigs, |s| mac(Hash::Sha256, s.as_bytes(), &[signed.as_bytes(), b".", req.body])) {
        return Err(VerifyError::Mismatch(name.into()));
    }
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn stripe_accepts_any_v1_and_checks_the_timestamp() {
        let sig = hex::encode(mac(Hash::Sha256, b"whsec_test", &[b"1000", b".", b"{}"]));
        let headers = h(&[("stripe-signature", &format!("t=1000,v1=00ff,v1={sig},v0=abc"))]);
        let p = Provider::Stripe;
        assert_eq!(check(&req(&p, &headers, b"{}", 1200), &s("whsec_test")), Ok(()));
        assert_eq!(check(&req(&p, &headers, b"{}", 1400), &s("whsec_test")), Err(VerifyError::Timestamp(300)));
        assert!(matches!(check(&req(&p, &headers, b"{ }", 1000), &s("whsec_test")), Err(VerifyError::Mismatch(_))));
        let no_t = h(&[("stripe-signature", &format!("v1={sig}"))]);
        assert!(matches!(check(&req(&p, &no_t, b"{}", 1000), &s("whsec_test")), Err(VerifyError::Malformed(_))));
    }
}
