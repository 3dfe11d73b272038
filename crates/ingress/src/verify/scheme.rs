//! The pieces providers' schemes share: HMACs, constant-time comparison, header
//! reading, timestamp tolerance and the one-header body HMAC most of them use.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};

use super::{Headers, Request, VerifyError};

/// Timestamped schemes accept this much clock skew unless the provider documents another.
pub const TOLERANCE_SECS: i64 = 300;

/// The hash under an HMAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    /// Only where the provider still signs with it (Twilio, Intercom).
    Sha1,
    Sha256,
    Sha512,
}

impl From<super::Algorithm> for Hash {
    fn from(a: super::Algorithm) -> Self {
        match a {
            super::Algorithm::Sha256 => Hash::Sha256,
            super::Algorithm::Sha512 => Hash::Sha512,
        }
    }
}

/// HMAC of the concatenated parts.
pub fn mac(hash: Hash, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    match hash {
        Hash::Sha1 => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
            let mut ctx = ring::hmac::Context::with_key(&key);
            parts.iter().for_each(|p| ctx.update(p));
            ctx.sign().as_ref().to_vec()
        }
        Hash::Sha256 => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            parts.iter().for_each(|p| m.update(p));
            m.finalize().into_bytes().to_vec()
        }
        Hash::Sha512 => {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            parts.iter().for_each(|p| m.update(p));
            m.finalize().into_bytes().to_vec()
        }
    }
}

/// Constant-time equality of a computed MAC and a presented one.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A required header's trimmed, non-empty value.
pub fn header<'a>(headers: &'a dyn Headers, name: &str) -> Result<&'a str, VerifyError> {
    headers.get(name).map(str::trim).filter(|v| !v.is_empty()).ok_or_else(|| VerifyError::MissingHeader(name.into()))
}

/// Refuses a signed time further than `tolerance` seconds from `now`.
pub fn check_timestamp(ts: i64, now: i64, tolerance: i64) -> Result<(), VerifyError> {
    if now.saturating_sub(ts).saturating_abs() > tolerance {
        return Err(VerifyError::Timestamp(tolerance));
    }
    Ok(())
}

/// Whether any secret's MAC over what `signed` gives equals any presented signature.
pub fn any_matches(secrets: &[String], presented: &[Vec<u8>], expected: impl Fn(&str) -> Vec<u8>) -> bool {
    secrets.iter().any(|s| {
        let want = expected(s);
        presented.iter().any(|p| ct_eq(&want, p))
    })
}

/// Decodes a signature in its encoding; `None` when it is not.
pub fn decode(encoding: super::Encoding, text: &str) -> Option<Vec<u8>> {
    match encoding {
        super::Encoding::Hex => hex::decode(text.trim()).ok(),
        super::Encoding::Base64 => STANDARD.decode(text.trim()).ok(),
    }
}

/// A body HMAC in one header: `<prefix><hex or base64 of HMAC(secret, body)>`.
pub struct BodyHmac<'a> {
    pub header: &'a str,
    pub hash: Hash,
    pub encoding: super::Encoding,
    pub prefix: Option<&'a str>,
}

impl BodyHmac<'_> {
    pub fn check(&self, req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
        let name = self.header.to_ascii_lowercase();
        let value = header(req.headers, &name)?;
        let sig = match self.prefix {
            Some(p) => value.strip_prefix(p).ok_or_else(|| VerifyError::Malformed(self.header.into()))?,
            None => value,
        };
        let presented = decode(self.encoding, sig).ok_or_else(|| VerifyError::Malformed(self.header.into()))?;
        if any_matches(secrets, &[presented], |s| mac(self.hash, s.as_bytes(), &[req.body])) {
            Ok(())
        } else {
            Err(VerifyError::Mismatch(self.header.into()))
        }
    }
}

/// `t=<ts>,v1=<sig>[,v1=…]`-style lists (Stripe, Calendly, Paddle with `;`): the
/// timestamp under `ts_name` and every value under `sig_name`, as text.
pub fn pairs<'a>(value: &'a str, sep: char, ts_name: &str, sig_name: &str) -> (Option<&'a str>, Vec<&'a str>) {
    let mut ts = None;
    let mut sigs = Vec::new();
    for item in value.split(sep) {
        match item.trim().split_once('=') {
            Some((k, v)) if k == ts_name => ts = Some(v),
            Some((k, v)) if k == sig_name => sigs.push(v),
            _ => {}
        }
    }
    (ts, sigs)
}

/// A JSON body's field, as text (strings unquoted, numbers as written).
pub fn json_field(body: &[u8], pointer: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    match doc.pointer(pointer)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Test helpers: a header map from pairs, and a request with it.
#[cfg(test)]
pub mod testing {
    use std::collections::HashMap;

    pub fn h(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())).collect()
    }

    pub fn req<'a>(
        provider: &'a super::super::Provider,
        headers: &'a HashMap<String, String>,
        body: &'a [u8],
        now: i64,
    ) -> super::Request<'a> {
        super::Request { provider, headers, body, method: "POST", url: "https://hooks.example.com/in/src_1", now }
    }

    pub fn s(secret: &str) -> Vec<String> {
        vec![secret.to_owned()]
    }
}
