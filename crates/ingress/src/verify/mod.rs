//! Signature verification of provider webhooks, over the raw body bytes, with
//! constant-time comparison. During a secret rotation every valid secret is
//! tried, and any one signature in a header that carries several may match.

mod body_hmac;
mod timestamped;

use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};

pub use hookgate_shared::source::{Algorithm, Encoding, HmacSpec, Provider};

/// Where a verifier reads headers from; lower-case names.
pub trait Headers {
    fn get(&self, name: &str) -> Option<&str>;
}

impl Headers for actix_web::http::header::HeaderMap {
    fn get(&self, name: &str) -> Option<&str> {
        actix_web::http::header::HeaderMap::get(self, name).and_then(|v| v.to_str().ok())
    }
}

impl Headers for std::collections::HashMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        std::collections::HashMap::get(self, name).map(String::as_str)
    }
}

/// Why a request is refused; each says what a tenant can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing signature header `{0}`")]
    MissingHeader(String),
    #[error("the `{0}` header is malformed")]
    Malformed(String),
    #[error("no signature in `{0}` matches the source's secret")]
    Mismatch(String),
    #[error("the signed timestamp is more than {0} seconds away from now")]
    Timestamp(i64),
}

impl VerifyError {
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::Timestamp(_) => "timestamp_out_of_tolerance",
            _ => "invalid_signature",
        }
    }
}

/// Timestamped schemes (Stripe, Slack, Standard Webhooks) accept this much clock skew.
pub const TOLERANCE_SECS: i64 = 300;

/// Verifies `body` against any of `secrets` (the secret strings as the tenant gave them).
pub fn verify(
    provider: &Provider,
    secrets: &[String],
    headers: &dyn Headers,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    match provider {
        Provider::Stripe => timestamped::stripe(secrets, headers, body, now),
        Provider::Slack => timestamped::slack(secrets, headers, body, now),
        Provider::StandardWebhooks => timestamped::standard(secrets, headers, body, now),
        Provider::Github => body_hmac::github(secrets, headers, body),
        Provider::Shopify => body_hmac::shopify(secrets, headers, body),
        Provider::Hmac(spec) => body_hmac::generic(spec, secrets, headers, body),
        Provider::None => Ok(()),
    }
}

/// HMAC of the concatenated parts.
fn mac(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    match algorithm {
        Algorithm::Sha256 => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            parts.iter().for_each(|p| m.update(p));
            m.finalize().into_bytes().to_vec()
        }
        Algorithm::Sha512 => {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            parts.iter().for_each(|p| m.update(p));
            m.finalize().into_bytes().to_vec()
        }
    }
}

fn header<'a>(headers: &'a dyn Headers, name: &str) -> Result<&'a str, VerifyError> {
    headers.get(name).map(str::trim).filter(|v| !v.is_empty()).ok_or_else(|| VerifyError::MissingHeader(name.into()))
}

fn check_timestamp(ts: i64, now: i64) -> Result<(), VerifyError> {
    if (now - ts).abs() > TOLERANCE_SECS {
        return Err(VerifyError::Timestamp(TOLERANCE_SECS));
    }
    Ok(())
}

/// Constant-time equality of a computed MAC and a presented one.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}
