//! Orum: `Signature`, a base64 RSA PKCS#1 v1.5 SHA-256 signature over the raw
//! body followed by the body's own `created_at` text, checked with the public
//! key Orum's `webhooks/secret` returns (PEM or base64 DER, SubjectPublicKeyInfo
//! or PKCS#1, at least 2048 bits). Orum puts no time in a header and retries for
//! 24 hours with the same signature, so no freshness window applies: a replay is
//! stopped by the dedupe on `event_id`, the event's stable id.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::header;
use super::{Check, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
};

const SIG: &str = "signature";

/// The rsaEncryption OID's DER content (1.2.840.113549.1.1.1).
const RSA_OID: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// One DER element: its tag, its content and what follows it; `None` if it is
/// not well formed (lengths of more than four bytes are refused: no key needs them).
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let (bytes, rest) = (rest.get(..n)?, rest.get(n..)?);
            (bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), rest)
        }
        _ => return None,
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// The PKCS#1 `RSAPublicKey` of a key given as PEM or base64 DER, in
/// SubjectPublicKeyInfo or PKCS#1 form, when its modulus has 2048 to 8192 bits.
pub fn rsa_public_key(text: &str) -> Option<Vec<u8>> {
    let body: String = text.lines().filter(|l| !l.trim_start().starts_with("-----")).collect::<Vec<_>>().concat();
    let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = STANDARD.decode(body).ok()?;
    let (tag, content, rest) = tlv(&der)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    // SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { OID rsaEncryption, NULL }, BIT STRING { 0, RSAPublicKey } }.
    let pkcs1 = match tlv(content)? {
        (0x30, alg, after) => {
            let (oid_tag, oid, _) = tlv(alg)?;
            let (bits_tag, bits, tail) = tlv(after)?;
            if oid_tag != 0x06 || oid != RSA_OID || bits_tag != 0x03 || !tail.is_empty() {
                return None;
            }
            bits.strip_prefix(&[0u8][..])?.to_vec()
        }
        (0x02, _, _) => der.clone(),
        _ => return None,
    };
    // RSAPublicKey: SEQUENCE { INTEGER n, INTEGER e }.
    let (0x30, key, b"") = tlv(&pkcs1)? else { return None };
    let (0x02, n, after) = tlv(key)? else { return None };
    let (0x02, e, b"") = tlv(after)? else { return None };
    let n = n.strip_prefix(&[0u8][..]).unwrap_or(n);
    (!e.is_empty() && (256..=1024).contains(&n.len())).then_some(pkcs1)
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, SIG)?.trim()).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let created_at = serde_json::from_slice::<serde_json::Value>(req.body)
        .ok()
        .and_then(|v| v.get("created_at").and_then(|c| c.as_str()).map(str::to_owned))
        .ok_or_else(|| VerifyError::Malformed("created_at".into()))?;
    let signed = [req.body, created_at.as_bytes()].concat();
    let ok = secrets.iter().filter_map(|k| rsa_public_key(k)).any(|key| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, key)
            .verify(&signed, &sig)
            .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(SIG.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::{h, req, s};
    use super::super::Provider;
    use super::*;

    /// A key made with `openssl genpkey -algorithm RSA` and a signature made with
    /// `openssl dgst -sha256 -sign` over BODY followed by its `created_at`.
    const PUBLIC: &str = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEApQ3mkCpj1kJJ1cX9aEkJYiEjDS7RCEBmY74zh+Dqt3cckhKd3MxR37RnE5q+uzmMyx1XrbZ0liQlpF/NAr2A3u5yZ0LR3qjFIPcUU8gS8BPjs9fqsHqJT2Es03+C+iNVxHpDc1J98SbEsmhRR4INnU4Z+FPv+FKr8lRcF5sBOp8zIXEfQJ3xsBjI0zbDynt2VSmKPgddAJWQNeOPH8YXE+L8cEe+5bt2tbzdAz+0hn21nWI0igNBS8aUqI0ubATKQg4FKuL7LxNqcc72RpfMkBMdD6rxEbkVeqP5F+DsgTTzWoWxE5thk3V0HF2wcyHJiOBXUxGBpXWVydUceUEp2QIDAQAB";
    const SIGNATURE: &str = "dAXofJQkq+QTIx8IYd+dmtR3U7dh4HVHmT/0hWJFT4GR0nlW/O8TKj+rz3EDbzJCnHVMctfRv9f72OHxGNyPb6/f73QS5lpdT7q3qH/0/XAvI7bpciYNuvQtT0tNpmV9ZhuEInYB2yV272ETBV+pY/6sHjAza4J/SmxFXw/HgcDMf29Vc7tJ/chQJV2stJ/L5Wo85Jo/4Jqk2Yc/diZ8Gv3tJslylVVrOGXNA2UGERN0CSnBgbFmnhin8QpisTD9MQ+e5l+uDQ6pOz0EjTLYWyUcr5FyxLn2jvBGIef9apysTxVSblBXiPFUegJtR+wkL9cmlqHIUC+lAvxf0PoiMQ==";
    const BODY: &[u8] = br#"{"event_id":"e1","event_type":"person_created","created_at":"2022-07-26T18:45:17.441Z"}"#;

    fn pem(der_b64: &str, label: &str) -> String {
        let lines: Vec<String> = der_b64.as_bytes().chunks(64).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    }

    #[test]
    fn orum_checks_the_rsa_signature_over_body_and_created_at_with_the_key_in_any_common_form() {
        let p = Provider::OrumIo;
        let hs = h(&[("Signature", SIGNATURE)]);
        let pkcs1 = STANDARD.encode(rsa_public_key(PUBLIC).unwrap());
        for key in [PUBLIC.to_owned(), pem(PUBLIC, "PUBLIC KEY"), pem(&pkcs1, "RSA PUBLIC KEY"), pkcs1.clone()] {
            assert_eq!(check(&req(&p, &hs, BODY, 1_700_000_000), &s(&key)), Ok(()), "{key}");
        }
        let changed = br#"{"event_id":"e2","event_type":"person_created","created_at":"2022-07-26T18:45:17.441Z"}"#;
        assert!(matches!(check(&req(&p, &hs, changed, 0), &s(PUBLIC)), Err(VerifyError::Mismatch(_))));
        let no_time = br#"{"event_id":"e1"}"#;
        assert!(matches!(check(&req(&p, &hs, no_time, 0), &s(PUBLIC)), Err(VerifyError::Malformed(_))));
        let bad = h(&[("Signature", "not base64!")]);
        assert!(matches!(check(&req(&p, &bad, BODY, 0), &s(PUBLIC)), Err(VerifyError::Malformed(_))));
    }

    #[test]
    fn a_key_that_is_not_an_rsa_public_key_of_2048_bits_or_more_is_refused() {
        assert!(rsa_public_key(PUBLIC).is_some());
        assert!(rsa_public_key("").is_none());
        assert!(rsa_public_key("bm90IGEga2V5").is_none());
        // A P-256 key (SendGrid's form) is a SubjectPublicKeyInfo of another algorithm.
        let p256 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==";
        assert!(rsa_public_key(p256).is_none());
        // A truncated key fails to parse rather than panicking.
        for n in [1, 10, 100, 200] {
            assert!(rsa_public_key(&STANDARD.encode(&STANDARD.decode(PUBLIC).unwrap()[..n])).is_none());
        }
    }
}
