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
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(c.query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    for name in ["hub.mode", "hub.verify_token", "hub.challenge"] {
        if pairs.iter().filter(|(k, _)| k == name).count() > 1 {
            return Err(UrlRefused::Malformed(format!("the query: duplicate field `{name}`")));
        }
    }
    let q = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
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

    fn check_url(query: &str) -> Result<UrlAnswer, UrlRefused> {
        let headers = actix_web::http::header::HeaderMap::new();
        subscribe(&UrlCheck {
            query,
            headers: &headers,
            verify_token: &|t| t == "vt-1",
            secret: &|_| unreachable!("Meta's check reads no secret"),
        })
    }

    #[test]
    fn metas_url_check_echoes_a_plain_challenge_for_its_token_and_refuses_the_rest() {
        let ok = check_url("hub.mode=subscribe&hub.verify_token=vt-1&hub.challenge=1158201444");
        assert!(matches!(ok, Ok(UrlAnswer::Text(c)) if c == "1158201444"));
        assert!(matches!(
            check_url("hub.mode=subscribe&hub.verify_token=no&hub.challenge=1"),
            Err(UrlRefused::NotOurs(_))
        ));
        for malformed in [
            "hub.mode=subscribe&hub.verify_token=vt-1",
            "hub.mode=subscribe&hub.verify_token=vt-1&hub.challenge=%3Cscript%3E",
            "hub.mode=subscribe&hub.verify_token=vt-1&hub.challenge=1&hub.challenge=2",
            "hub.mode=subscribe&hub.verify_token=no&hub.verify_token=vt-1&hub.challenge=1",
        ] {
            assert!(matches!(check_url(malformed), Err(UrlRefused::Malformed(_))), "{malformed}");
        }
    }

    #[test]
    fn meta_signs_the_body_with_the_app_secret() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let sig = format!("sha256={}", hex::encode(mac(Hash::Sha256, b"app-secret", &[body])));
        let p = Provider::Meta;
        assert_eq!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), body, 0), &s("app-secret")), Ok(()));
        assert!(check(&req(&p, &h(&[("x-hub-signature-256", &sig)]), b"{}", 0), &s("app-secret")).is_err());
    }
}
