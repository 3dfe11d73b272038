//! Port: `x-port-signature: v1,<base64 HMAC-SHA256(client secret, "ts.body")>`
//! with `x-port-timestamp` (seconds), refused outside five minutes (Port leaves
//! the tolerance to the receiver); no event id: the body is the key.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::{any_matches, check_timestamp, header, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError, TOLERANCE_SECS};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::None,
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-port-signature";
const TS: &str = "x-port-timestamp";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let ts_text = header(req.headers, TS)?.trim();
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(TS.into()))?;
    // Space-separated `v1,<sig>` entries, as Standard Webhooks lists them.
    let sigs: Vec<Vec<u8>> = header(req.headers, SIG)?
        .split_whitespace()
        .filter_map(|e| e.strip_prefix("v1,"))
        .filter_map(|b| STANDARD.decode(b).ok())
        .collect();
    if sigs.is_empty() {
        return Err(VerifyError::Malformed(SIG.into()));
    }
    if !any_matches(secrets, &sigs, |s| mac(Hash::Sha256, s.as_bytes(), &[ts_text.as_bytes(), b".", req.body])) {
        return Err(VerifyError::Mismatch(SIG.into()));
    }
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn port_signs_timestamp_dot_body_in_base64() {
        let body = br#"{"action":{"identifier":"deploy"}}"#;
        let sig = STANDARD.encode(mac(Hash::Sha256, b"port-secret", &[b"1700000000.", body]));
        let hs = h(&[(SIG, &format!("v1,{sig}")), (TS, "1700000000")]);
        let p = Provider::Port;
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_100), &s("port-secret")), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_400), &s("port-secret")), Err(VerifyError::Timestamp(300)));
        assert!(matches!(check(&req(&p, &hs, body, 1_700_000_100), &s("other")), Err(VerifyError::Mismatch(_))));
    }
}
