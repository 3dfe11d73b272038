//! Linear: `Linear-Signature: <hex HMAC-SHA256(secret, body)>`, with the body's
//! `webhookTimestamp` (milliseconds) within a minute, as Linear's SDK checks;
//! `Linear-Delivery` is the delivery's id, `<type>.<action>` (`Issue.create`) the
//! event type.

use serde_json::Value;

use super::scheme::{check_timestamp, BodyHmac, Hash};
use super::{Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Header("Linear-Delivery"),
    event_type: TypeRule::Custom(event_type),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const TOLERANCE_SECS: i64 = 60;

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "linear-signature", hash: Hash::Sha256, encoding: Encoding::Hex, prefix: None }
        .check(req, secrets)?;
    let doc: Value = serde_json::from_slice(req.body).map_err(|_| VerifyError::Malformed("webhookTimestamp".into()))?;
    let ms = doc
        .get("webhookTimestamp")
        .and_then(Value::as_i64)
        .ok_or_else(|| VerifyError::Malformed("webhookTimestamp".into()))?;
    check_timestamp(ms / 1000, req.now, TOLERANCE_SECS)
}

fn event_type(req: &Request) -> Option<String> {
    let doc: Value = serde_json::from_slice(req.body).ok()?;
    let kind = doc.get("type")?.as_str()?;
    Some(match doc.get("action").and_then(Value::as_str) {
        Some(action) => format!("{kind}.{action}"),
        None => kind.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::scheme::{
        mac,
        testing::{h, req, s},
    };
    use super::super::Provider;
    use super::*;

    #[test]
    fn linear_checks_the_signature_then_the_signed_timestamp() {
        let body = br#"{"action":"create","type":"Issue","webhookTimestamp":1700000000123}"#;
        let sig = hex::encode(mac(Hash::Sha256, b"lin", &[body]));
        let p = Provider::Linear;
        let hs = h(&[("linear-signature", &sig)]);
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_030), &s("lin")), Ok(()));
        assert_eq!(check(&req(&p, &hs, body, 1_700_000_100), &s("lin")), Err(VerifyError::Timestamp(60)));
        assert!(matches!(check(&req(&p, &hs, body, 1_700_000_000), &s("nil")), Err(VerifyError::Mismatch(_))));
        assert_eq!(event_type(&req(&p, &hs, body, 0)).as_deref(), Some("Issue.create"));
    }
}
