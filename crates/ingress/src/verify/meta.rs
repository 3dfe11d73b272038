//! Meta (Facebook, Instagram, WhatsApp): `X-Hub-Signature-256: sha256=<hex
//! HMAC-SHA256(app secret, body)>` over the body as sent; no event id (the body
//! is the key), `object` the type. Its subscription check (`GET` with
//! `hub.mode=subscribe`, the verify token and a challenge to echo) is
//! [`subscribe`], answered at the door.

use super::scheme::{BodyHmac, Hash};
use super::{
    Check, DoorRules, Encoding, KeyRule, Preset, Request, TypeRule, UrlAnswer, UrlCheck, UrlRefused, VerifyError,
};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/object"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules { url_check: Some(subscribe), ..DoorRules::PLAIN },
};

/// Meta's check of a URL: `hub.mode=subscribe` with the source's verify token,
/// answered with `hub.challenge` as text.
fn subscribe(c: &UrlCheck<'_>) -> Result<UrlAnswer, UrlRefused> {
    let q = |name: &str| {
        url::form_urlencoded::parse(c.query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
    };
    // Meta's challenge is digits; nothing else is reflected.
    let challenge = q("hub.challenge").filter(|c| {
        !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let (Some("subscribe"), Some(presented), Some(challenge)) =
        (q("hub.mode").as_deref(), q("hub.verify_token"), challenge)
    else {
        return Err(UrlRefused::Malformed(
            "`hub.mode=subscribe`, `hub.verify_token` and `hub.challenge` are needed".into(),
        ));
    };
    if !(c.verify_token)(&presented) {
        return Err(UrlRefused::NotOurs("the verify token does not match".into()));
    }
    Ok(UrlAnswer::Text(challenge))
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    BodyHmac { header: "x-hub-signature-256", hash: Hash::Sha256, encoding: Encoding::Hex, prefix: Some("sha256=") }
        .check(req, secrets)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::mac;
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn meta_signs_the_body_with_the_app_secret() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let sig = format!("sha256={}", hex::encode(mac(Hash::Sha256, b"app-secret", &[body])));
        let p = Provider::Meta;
        assert_eq!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), body, 0), &s("app-secret")), Ok(()));
        assert!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), b"{}", 0), &s("app-secret")).is_err());
    }
}
