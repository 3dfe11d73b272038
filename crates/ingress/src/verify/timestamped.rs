//! Schemes that sign a timestamp with the body, checked against a tolerance:
//! Stripe, Slack and Standard Webhooks.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::{check_timestamp, ct_eq, header, mac, Algorithm, Headers, VerifyError};

/// `Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "ts.body")>[,v1=…]`.
pub fn stripe(secrets: &[String], headers: &dyn Headers, body: &[u8], now: i64) -> Result<(), VerifyError> {
    let name = "stripe-signature";
    let value = header(headers, name)?;
    let mut ts = None;
    let mut sigs = Vec::new();
    for item in value.split(',') {
        match item.trim().split_once('=') {
            Some(("t", v)) => ts = v.parse::<i64>().ok(),
            Some(("v1", v)) => sigs.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let ts = ts.ok_or_else(|| VerifyError::Malformed(name.into()))?;
    if sigs.is_empty() {
        return Err(VerifyError::Malformed(name.into()));
    }
    let signed = ts.to_string();
    let ok = secrets.iter().any(|s| {
        let expected = mac(Algorithm::Sha256, s.as_bytes(), &[signed.as_bytes(), b".", body]);
        sigs.iter().any(|sig| ct_eq(&expected, sig))
    });
    if !ok {
        return Err(VerifyError::Mismatch(name.into()));
    }
    check_timestamp(ts, now)
}

/// `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:ts:body")>`, `X-Slack-Request-Timestamp`.
pub fn slack(secrets: &[String], headers: &dyn Headers, body: &[u8], now: i64) -> Result<(), VerifyError> {
    let ts_header = "x-slack-request-timestamp";
    let sig_header = "x-slack-signature";
    let ts_text = header(headers, ts_header)?;
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(ts_header.into()))?;
    let sig = header(headers, sig_header)?
        .strip_prefix("v0=")
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| VerifyError::Malformed(sig_header.into()))?;
    let ok = secrets
        .iter()
        .any(|s| ct_eq(&mac(Algorithm::Sha256, s.as_bytes(), &[b"v0:", ts_text.as_bytes(), b":", body]), &sig));
    if !ok {
        return Err(VerifyError::Mismatch(sig_header.into()));
    }
    check_timestamp(ts, now)
}

/// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<b64> …`,
/// keyed by the base64 after `whsec_`.
pub fn standard(secrets: &[String], headers: &dyn Headers, body: &[u8], now: i64) -> Result<(), VerifyError> {
    let id = header(headers, "webhook-id")?;
    let ts_text = header(headers, "webhook-timestamp")?;
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed("webhook-timestamp".into()))?;
    let sigs: Vec<Vec<u8>> = header(headers, "webhook-signature")?
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|b| STANDARD.decode(b).ok())
        .collect();
    if sigs.is_empty() {
        return Err(VerifyError::Malformed("webhook-signature".into()));
    }
    let ok = secrets.iter().any(|s| {
        let key = STANDARD.decode(s.strip_prefix("whsec_").unwrap_or(s)).unwrap_or_default();
        let expected = mac(Algorithm::Sha256, &key, &[id.as_bytes(), b".", ts_text.as_bytes(), b".", body]);
        sigs.iter().any(|sig| ct_eq(&expected, sig))
    });
    if !ok {
        return Err(VerifyError::Mismatch("webhook-signature".into()));
    }
    check_timestamp(ts, now)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn h(pairs: &[(&str, String)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[derive(serde::Deserialize)]
    struct Vector {
        secret: String,
        msg_id: String,
        timestamp: i64,
        payload: String,
        signature: String,
    }

    #[test]
    fn standard_webhooks_vectors_verify_and_fail_outside_tolerance() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/standard-webhooks-vectors.json");
        let vectors: Vec<Vector> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for v in vectors {
            let headers = h(&[
                ("webhook-id", v.msg_id.clone()),
                ("webhook-timestamp", v.timestamp.to_string()),
                ("webhook-signature", format!("v1,bogus {}", v.signature)),
            ]);
            assert_eq!(
                standard(std::slice::from_ref(&v.secret), &headers, v.payload.as_bytes(), v.timestamp + 10),
                Ok(())
            );
            assert_eq!(
                standard(std::slice::from_ref(&v.secret), &headers, v.payload.as_bytes(), v.timestamp + 301),
                Err(VerifyError::Timestamp(300))
            );
            assert!(matches!(standard(&[v.secret], &headers, b"tampered", v.timestamp), Err(VerifyError::Mismatch(_))));
        }
    }

    #[test]
    fn stripe_accepts_any_v1_and_checks_the_timestamp() {
        let secret = "whsec_test".to_owned();
        let sig = hex::encode(mac(Algorithm::Sha256, secret.as_bytes(), &[b"1000", b".", b"{}"]));
        let headers = h(&[("stripe-signature", format!("t=1000,v1=00ff,v1={sig},v0=abc"))]);
        assert_eq!(stripe(std::slice::from_ref(&secret), &headers, b"{}", 1200), Ok(()));
        assert_eq!(stripe(std::slice::from_ref(&secret), &headers, b"{}", 1400), Err(VerifyError::Timestamp(300)));
        assert!(matches!(stripe(std::slice::from_ref(&secret), &headers, b"{ }", 1000), Err(VerifyError::Mismatch(_))));
        let no_t = h(&[("stripe-signature", format!("v1={sig}"))]);
        assert!(matches!(stripe(&[secret], &no_t, b"{}", 1000), Err(VerifyError::Malformed(_))));
    }

    #[test]
    fn slack_signs_version_timestamp_and_body() {
        let secret = "8f742231b10e8888abcd99yyyzzz85a5".to_owned();
        let sig = hex::encode(mac(Algorithm::Sha256, secret.as_bytes(), &[b"v0:1531420618:", b"token=x"]));
        let headers =
            h(&[("x-slack-request-timestamp", "1531420618".into()), ("x-slack-signature", format!("v0={sig}"))]);
        assert_eq!(slack(std::slice::from_ref(&secret), &headers, b"token=x", 1531420618), Ok(()));
        assert!(slack(&[secret], &headers, b"token=y", 1531420618).is_err());
    }
}
