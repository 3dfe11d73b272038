//! Airwallex: `x-signature: <hex HMAC-SHA256(secret, x-timestamp + body)>`, the
//! timestamp in milliseconds (refused outside five minutes: Airwallex documents
//! none); the event's `id` is the key, `name` its type.

use super::scheme::{any_matches, check_timestamp, header, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError, TOLERANCE_SECS};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/id"),
    event_type: TypeRule::Pointer("/name"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-signature";
const TS: &str = "x-timestamp";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let ts_text = header(req.headers, TS)?.trim();
    let ms: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(TS.into()))?;
    let sig = hex::decode(header(req.headers, SIG)?.trim()).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    if !any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &[ts_text.as_bytes(), req.body])) {
        return Err(VerifyError::Mismatch(SIG.into()));
    }
    check_timestamp(ms / 1000, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn airwallex_signs_the_millisecond_timestamp_then_the_body() {
        let body = br#"{"id":"evt_1","name":"payment_intent.succeeded"}"#;
        let sig = hex::encode(mac(Hash::Sha256, b"awx", &[b"1700000000123", body]));
        let hs = h(&[(SIG, &sig), (TS, "1700000000123")]);
        let p = Provider::Airwallex;
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_100), &s("awx")), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_400), &s("awx")), Err(VerifyError::Timestamp(300)));
        let shifted = h(&[(SIG, &sig), (TS, "1700000000124")]);
        assert!(matches!(check(&req(&p, &shifted, body, 1_700_000_100), &s("awx")), Err(VerifyError::Mismatch(_))));
    }
}
