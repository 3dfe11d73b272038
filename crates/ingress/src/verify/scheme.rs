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

/// Constant-time equality of a computed MAC and a presented one. The length
/// check returns early: a MAC's length is public (the algorithm's). A shared
/// secret compared as presented (basic auth, GitLab's token) goes through
/// `hookgate_shared::crypto::secrets_equal`, which hides its length too.
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

/// The encodings of Ed25519's small-order points (sign bit aside), as libsodium
/// lists them: a public key among them verifies forged signatures.
const SMALL_ORDER: [[u8; 32]; 7] = {
    let mut points = [[0u8; 32]; 7];
    points[1][0] = 1;
    points[2] = [
        0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0, 0xd5, 0xdf,
        0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05,
    ];
    points[3] = [
        0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f, 0x2a, 0x20,
        0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a,
    ];
    // p - 1, p and p + 1: the order-2 point and non-canonical forms of 0 and 1.
    let mut i = 4;
    while i < 7 {
        let mut j = 1;
        while j < 31 {
            points[i][j] = 0xff;
            j += 1;
        }
        points[i][31] = 0x7f;
        i += 1;
    }
    points[4][0] = 0xec;
    points[5][0] = 0xed;
    points[6][0] = 0xee;
    points
};

/// Whether 32 bytes can be an Ed25519 public key that forgeries cannot satisfy:
/// not a small-order point (the identity, or one of order 2, 4 or 8).
pub fn ed25519_key_ok(key: &[u8]) -> bool {
    key.len() == 32 && !SMALL_ORDER.iter().any(|p| p[..31] == key[..31] && p[31] == key[31] & 0x7f)
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

/// `<sig header>: v0=<hex HMAC-SHA256(secret, "v0:ts:body")>` with the timestamp
/// in a header of its own, within [`TOLERANCE_SECS`]: Slack's scheme, which Zoom
/// copied under its own header names.
pub fn v0_signed(req: &Request, secrets: &[String], ts_header: &str, sig_header: &str) -> Result<(), VerifyError> {
    let ts_text = header(req.headers, ts_header)?;
    let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(ts_header.into()))?;
    let sig = header(req.headers, sig_header)?
        .strip_prefix("v0=")
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| VerifyError::Malformed(sig_header.into()))?;
    if !any_matches(secrets, &[sig], |s| mac(Hash::Sha256, s.as_bytes(), &[b"v0:", ts_text.as_bytes(), b":", req.body]))
    {
        return Err(VerifyError::Mismatch(sig_header.into()));
    }
    check_timestamp(ts, req.now, TOLERANCE_SECS)
}

/// A `<ts>=…<sep><sig>=…` list in one header (Paddle's `ts=…;h1=…`, Calendly's
/// `t=…,v1=…`), any listed signature being hex HMAC-SHA256(secret, ts + joiner +
/// body) over the timestamp as sent, within `tolerance`.
pub struct TimestampedList<'a> {
    pub header: &'a str,
    pub separator: char,
    pub ts_name: &'a str,
    pub sig_name: &'a str,
    pub joiner: &'a [u8],
    pub tolerance: i64,
}

impl TimestampedList<'_> {
    pub fn check(&self, req: &Request, secrets: &[String]) -> Result<(), VerifyError> {
        let name = self.header;
        let (ts, sigs) = pairs(header(req.headers, name)?, self.separator, self.ts_name, self.sig_name);
        let ts_text = ts.ok_or_else(|| VerifyError::Malformed(name.into()))?;
        let ts: i64 = ts_text.parse().map_err(|_| VerifyError::Malformed(name.into()))?;
        let sigs: Vec<Vec<u8>> = sigs.iter().filter_map(|s| hex::decode(s).ok()).collect();
        if sigs.is_empty() {
            return Err(VerifyError::Malformed(name.into()));
        }
        let signed = |s: &str| mac(Hash::Sha256, s.as_bytes(), &[ts_text.as_bytes(), self.joiner, req.body]);
        if !any_matches(secrets, &sigs, signed) {
            return Err(VerifyError::Mismatch(name.into()));
        }
        check_timestamp(ts, req.now, self.tolerance)
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
