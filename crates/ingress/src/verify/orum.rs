//! Orum: `Signature`, a base64 RSA PKCS#1 v1.5 SHA-256 signature over the raw
//! body followed by the body's own `created_at` text, checked with the public
//! key Orum's `webhooks/secret` returns (PEM or base64 DER, SubjectPublicKeyInfo
//! or PKCS#1, at least 2048 bits). Orum puts no time in a header and retries for
//! 24 hours with the same signature, so the signed `created_at` is the freshness
//! check: an event more than [`MOST_AGE_SECS`] old (or more than five minutes
//! ahead) is refused, and within that window a replay is a duplicate of
//! `event_id`, the event's stable id (no dedupe window is shorter than a day).

use base64::{engine::general_purpose::STANDARD, Engine};

use super::scheme::header;
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Sync(check),
    key: KeyRule::Pointer("/event_id"),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
    door: DoorRules::PLAIN,
};

const SIG: &str = "signature";

/// Orum's retries run 24 hours from the event; five minutes more for clocks.
pub const MOST_AGE_SECS: i64 = 24 * 3600 + 300;

/// The rsaEncryption OID's DER content (1.2.840.113549.1.1.1).
const RSA_OID: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// One DER element: its tag, its content and what follows it; `None` if it is
/// not well formed DER (lengths in their shortest form, of four bytes at most:
/// no key needs more).
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let (bytes, rest) = (rest.get(..n)?, rest.get(n..)?);
            let len = bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            // DER: a long form only past 127, and no leading zero byte.
            if bytes[0] == 0 || len < 0x80 {
                return None;
            }
            (len, rest)
        }
        _ => return None,
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// A DER INTEGER's magnitude, if it is positive and minimally encoded.
fn positive(int: &[u8]) -> Option<&[u8]> {
    match int {
        [0, rest @ ..] if rest.first().is_some_and(|b| *b >= 0x80) => Some(rest),
        [first, ..] if *first != 0 && *first < 0x80 => Some(int),
        _ => None,
    }
}

/// The PKCS#1 `RSAPublicKey` of a key given as PEM or base64 DER, in
/// SubjectPublicKeyInfo or PKCS#1 form, when its modulus has 2048 to 8192 bits.
pub fn rsa_public_key(text: &str) -> Option<Vec<u8>> {
    // A PEM pasted on one line, its line breaks written as `\n`.
    let text = text.replace("\\n", "\n");
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
    let (n, e) = (positive(n)?, positive(e)?);
    // What ring verifies with: 2048 to 8192 bits, an odd modulus, an odd exponent
    // from 3 below 2^33; a key it would refuse is refused here, when it is given.
    let e_value = e.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let ok = (256..=1024).contains(&n.len())
        && n[0] >= 0x80
        && n[n.len() - 1] & 1 == 1
        && e.len() <= 5
        && e_value & 1 == 1
        && (3..1 << 33).contains(&e_value);
    ok.then_some(pkcs1)
}

fn check(req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
    let sig = STANDARD.decode(header(req.headers, SIG)?.trim()).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    // A signature of a 2048- to 8192-bit key, before the body is read at all.
    if !(256..=1024).contains(&sig.len()) {
        return Err(VerifyError::Malformed(SIG.into()));
    }
    let created_at = serde_json::from_slice::<serde_json::Value>(req.body)
        .ok()
        .and_then(|v| v.get("created_at").and_then(|c| c.as_str()).map(str::to_owned))
        .ok_or_else(|| VerifyError::Malformed("created_at".into()))?;
    let at = chrono::DateTime::parse_from_rfc3339(&created_at)
        .map_err(|_| VerifyError::Malformed("created_at".into()))?
        .timestamp();
    let signed = [req.body, created_at.as_bytes()].concat();
    let ok = secrets.iter().filter_map(|k| rsa_public_key(k)).any(|key| {
        ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, key)
            .verify(&signed, &sig)
            .is_ok()
    });
    if !ok {
        return Err(VerifyError::Mismatch(SIG.into()));
    }
    if at < req.now - MOST_AGE_SECS || at > req.now + 300 {
        return Err(VerifyError::Timestamp(MOST_AGE_SECS));
    }
    Ok(())
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
        let lines: Vec<String> =
            der_b64.as_bytes().chunks(64).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    }

    #[test]
    fn orum_checks_the_rsa_signature_over_body_and_created_at_with_the_key_in_any_common_form() {
        let p = Provider::OrumIo;
        let hs = h(&[("Signature", SIGNATURE)]);
        let pkcs1 = STANDARD.encode(rsa_public_key(PUBLIC).unwrap());
        let now = 1_658_861_117 + 3600; // an hour after the event's created_at
        let one_line = pem(PUBLIC, "PUBLIC KEY").replace('\n', "\\n");
        for key in
            [PUBLIC.to_owned(), pem(PUBLIC, "PUBLIC KEY"), pem(&pkcs1, "RSA PUBLIC KEY"), pkcs1.clone(), one_line]
        {
            assert_eq!(check(&req(&p, &hs, BODY, now), &s(&key)), Ok(()), "{key}");
        }
        let late = now + MOST_AGE_SECS;
        assert!(matches!(check(&req(&p, &hs, BODY, late), &s(PUBLIC)), Err(VerifyError::Timestamp(_))));
        let early = 1_658_861_117 - 3600;
        assert!(matches!(check(&req(&p, &hs, BODY, early), &s(PUBLIC)), Err(VerifyError::Timestamp(_))));
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
        // A truncated key, or one with anything after it, fails to parse rather than panicking.
        let der = STANDARD.decode(PUBLIC).unwrap();
        for n in [1, 10, 100, 200, der.len() - 1] {
            assert!(rsa_public_key(&STANDARD.encode(&der[..n])).is_none());
        }
        assert!(rsa_public_key(&STANDARD.encode([der.as_slice(), &[0]].concat())).is_none());
        // Lengths not in DER's shortest form, indefinite, or too long.
        for bad in [
            &[0x30, 0x80][..],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff],
            &[0x30, 0x81, 0x05, 1, 2, 3, 4, 5],
        ] {
            assert!(rsa_public_key(&STANDARD.encode(bad)).is_none());
        }
        // The PKCS#1 key with its exponent made even, or its modulus made even.
        let pkcs1 = rsa_public_key(PUBLIC).unwrap();
        let mut even_e = pkcs1.clone();
        *even_e.last_mut().unwrap() &= 0xfe;
        assert!(rsa_public_key(&STANDARD.encode(&even_e)).is_none());
        let mut even_n = pkcs1.clone();
        let n_end = even_n.len() - 6; // before `02 03 01 00 01`, the exponent 65537
        even_n[n_end] &= 0xfe;
        assert!(rsa_public_key(&STANDARD.encode(&even_n)).is_none());
        assert!(rsa_public_key(&STANDARD.encode(&pkcs1)).is_some());
    }
}
