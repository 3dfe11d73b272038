//! Senders that authenticate with a shared value sent as is, compared in
//! constant time: OpenClaw (`Authorization: Bearer <token>` or `x-openclaw-token`),
//! Vapi (`x-vapi-secret`, its server URL secret) and Adobe Sign (`X-AdobeSign-ClientId`,
//! the application's client id, which the answer echoes). Nothing is signed.

use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, UrlAnswer, UrlCheck, UrlRefused, VerifyError};

pub const OPENCLAW: Preset = Preset {
    check: Check::Sync(openclaw),
    key: KeyRule::Body,
    event_type: TypeRule::None,
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

pub const VAPI: Preset = Preset {
    check: Check::Sync(vapi),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/message/type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

pub const ADOBE_SIGN: Preset = Preset {
    check: Check::Sync(adobe_sign),
    key: KeyRule::Pointer("/webhookNotificationId"),
    event_type: TypeRule::Pointer("/event"),
    handshake: None,
    unsigned_ping: None,
    // Adobe Sign takes a notification as delivered only with its client id echoed,
    // and checks the URL the same way before it sends.
    door: DoorRules { url_check: Some(adobe_sign_url), echo_header: Some(ADOBE_SIGN_ID), ..DoorRules::PLAIN },
};

const ADOBE_SIGN_ID: &str = "x-adobesign-clientid";

/// Adobe Sign's check of a URL: its client id (the source's secret), echoed in
/// the header and as JSON.
fn adobe_sign_url(c: &UrlCheck<'_>) -> Result<UrlAnswer, UrlRefused> {
    let presented = c.headers.get(ADOBE_SIGN_ID).unwrap_or_default();
    if !(c.secret)(presented).map_err(UrlRefused::Broken)? {
        return Err(UrlRefused::NotOurs("`X-AdobeSign-ClientId` is not this source's client id".into()));
    }
    Ok(UrlAnswer::Json {
        header: ("X-AdobeSign-ClientId", presented.to_owned()),
        body: serde_json::json!({ "xAdobeSignClientId": presented }),
    })
}

/// Whether `presented` is one of the secrets (the check of every sender here,
/// and of Adobe Sign's `GET` in `door.rs`).
pub(crate) fn matches(secrets: &[String], presented: Option<&str>, name: &str) -> Result<(), VerifyError> {
    let presented =
        presented.map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| VerifyError::MissingHeader(name.into()))?;
    if secrets.iter().any(|s| hookgate_shared::crypto::secrets_equal(s.as_bytes(), presented.as_bytes())) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(name.into()))
    }
}

fn openclaw(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    // The scheme's name is case-insensitive (RFC 7235).
    let bearer = req.headers.get("authorization").map(str::trim).and_then(|v| {
        let (scheme, token) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then_some(token)
    });
    matches(secrets, bearer.or_else(|| req.headers.get("x-openclaw-token")), "x-openclaw-token")
}

fn adobe_sign(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    matches(secrets, req.headers.get("x-adobesign-clientid"), "x-adobesign-clientid")
}

fn vapi(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    matches(secrets, req.headers.get("x-vapi-secret"), "x-vapi-secret")
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn a_token_sender_is_checked_by_its_token_in_either_header() {
        let p = Provider::Openclaw;
        assert_eq!(openclaw(&req(&p, &h(&[("authorization", "Bearer tok")]), b"{}", 0), &s("tok")), Ok(()));
        assert_eq!(openclaw(&req(&p, &h(&[("authorization", "bearer tok")]), b"{}", 0), &s("tok")), Ok(()));
        assert_eq!(openclaw(&req(&p, &h(&[("x-openclaw-token", "tok")]), b"{}", 0), &s("tok")), Ok(()));
        assert!(matches!(
            openclaw(&req(&p, &h(&[("x-openclaw-token", "tok2")]), b"{}", 0), &s("tok")),
            Err(VerifyError::Mismatch(_))
        ));
        assert!(matches!(openclaw(&req(&p, &h(&[]), b"{}", 0), &s("tok")), Err(VerifyError::MissingHeader(_))));
        let v = Provider::Vapi;
        assert_eq!(vapi(&req(&v, &h(&[("x-vapi-secret", "vs")]), b"{}", 0), &s("vs")), Ok(()));
        assert!(vapi(&req(&v, &h(&[("x-vapi-secret", "no")]), b"{}", 0), &s("vs")).is_err());
        let a = Provider::AdobeSign;
        assert_eq!(adobe_sign(&req(&a, &h(&[("x-adobesign-clientid", "CID")]), b"{}", 0), &s("CID")), Ok(()));
        assert!(adobe_sign(&req(&a, &h(&[]), b"{}", 0), &s("CID")).is_err());
    }
}
