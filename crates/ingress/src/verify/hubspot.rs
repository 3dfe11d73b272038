//! HubSpot (signature v3): `X-HubSpot-Signature-v3: <base64 HMAC-SHA256(client
//! secret, method + URI + body + timestamp)>` with `X-HubSpot-Request-Timestamp`
//! in milliseconds, refused when older than five minutes. The URI is the source's
//! `publicUrl` with the characters HubSpot decodes decoded. A request is a batch
//! of events: the body is the key, the first event's `subscriptionType` the type.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::{any_matches, check_timestamp, header, mac, Hash, TOLERANCE_SECS};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Body,
    event_type: TypeRule::Pointer("/0/subscriptionType"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "x-hubspot-signature-v3";
const TS: &str = "x-hubspot-request-timestamp";

/// The escapes HubSpot's documentation lists as decoded before signing.
const DECODED: [(&str, &str); 12] = [
    ("%3A", ":"),
    ("%2F", "/"),
    ("%3F", "?"),
    ("%40", "@"),
    ("%21", "!"),
    ("%24", "$"),
    ("%27", "'"),
    ("%28", "("),
    ("%29", ")"),
    ("%2A", "*"),
    ("%2C", ","),
    ("%3B", ";"),
];

fn decoded_uri(url: &str) -> String {
    let mut out = url.to_owned();
    for (from, to) in DECODED {
        out = out.replace(from, to).replace(&from.to_ascii_lowercase(), to);
    }
    out
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, SIG)?).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let ts_text = header(req.headers, TS)?;
    let ms: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(TS.into()))?;
    let uri = decoded_uri(req.url);
    let parts: [&[u8]; 4] = [req.method.as_bytes(), uri.as_bytes(), req.body, ts_text.as_bytes()];
    if !any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &parts)) {
        return Err(VerifyError::Mismatch(SIG.into()));
    }
    check_timestamp(ms / 1000, req.now, TOLERANCE_SECS)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, s};
    use super::super::Provider;
    use super::*;

    #[test]
    fn hubspot_signs_method_uri_body_and_timestamp() {
        let url = "https://hooks.example.com/in/src_1?a=%3Ab";
        let body = br#"[{"eventId":1,"subscriptionType":"contact.creation"}]"#;
        let signed = ["POST".as_bytes(), b"https://hooks.example.com/in/src_1?a=:b", body, b"1700000000000"].concat();
        let sig = STANDARD.encode(mac(Hash::Sha256, b"cs", &[&signed]));
        let hs = h(&[(SIG, &sig), (TS, "1700000000000")]);
        let p = Provider::Hubspot;
        let r = |now, method| Request { provider: &p, headers: &hs, body, method, url, now };
        assert_eq!(check(&r(1_700_000_100, "POST"), &s("cs")), Ok(()));
        assert!(matches!(check(&r(1_700_000_400, "POST"), &s("cs")), Err(VerifyError::Timestamp(_))));
        assert!(matches!(check(&r(1_700_000_100, "PUT"), &s("cs")), Err(VerifyError::Mismatch(_))));
    }
}
