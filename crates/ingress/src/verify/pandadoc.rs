//! PandaDoc: the signature is in the URL's query, `?signature=<hex
//! HMAC-SHA256(shared key, body)>`; the body is a list of events with no event id
//! (the body is the key), the first one's `event` the type.

use super::scheme::{any_matches, mac, Hash};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/0/event"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const PARAM: &str = "signature";

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let url = url::Url::parse(req.url).map_err(|_| VerifyError::Malformed(PARAM.into()))?;
    let sig = url
        .query_pairs()
        .find(|(k, _)| k == PARAM)
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| VerifyError::MissingHeader(PARAM.into()))?;
    let presented = hex::decode(sig.trim()).map_err(|_| VerifyError::Malformed(PARAM.into()))?;
    if any_matches(secrets, &[presented], |s| mac(Hash::Sha256, s.as_bytes(), &[req.body])) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(PARAM.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, s};
    use super::super::{Provider, Request};
    use super::*;

    #[test]
    fn pandadoc_signs_the_body_and_puts_the_signature_in_the_query() {
        let body = br#"[{"event":"document_state_changed","data":{"id":"d1"}}]"#;
        let sig = hex::encode(mac(Hash::Sha256, b"pd", &[body]));
        let url = format!("https://hg.test/in/src_1/tok?signature={sig}");
        let hs = h(&[]);
        let req = |url: &str, body: &[u8]| -> Result<(), VerifyError> {
            let r = Request { provider: &Provider::PandaDoc, headers: &hs, body, method: "POST", url, now: 0 };
            check(&r, &s("pd"))
        };
        assert_eq!(req(&url, body), Ok(()));
        assert!(matches!(req(&url, b"[]"), Err(VerifyError::Mismatch(_))));
        assert!(matches!(req("https://hg.test/in/src_1/tok", body), Err(VerifyError::MissingHeader(_))));
    }
}
