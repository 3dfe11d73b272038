//! The `whsec_` signing-secret format (Svix's, Standard Webhooks'): generated,
//! checked and decoded here for endpoints and Standard Webhooks sources alike.

use base64::{engine::general_purpose::STANDARD, Engine};
use rand::RngCore;

const PREFIX: &str = "whsec_";

/// A fresh endpoint secret: `whsec_` and 24 random bytes in base64, as Svix issues.
pub fn generate_secret() -> String {
    let mut key = [0u8; 24];
    rand::rng().fill_bytes(&mut key);
    text(&key)
}

/// Why a given secret cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`secret` must be `whsec_` followed by 32 to 100 base64 characters")]
pub struct BadSecret;

/// Checks a user-supplied secret (`whsec_` optional, as Svix) and normalises it.
pub fn normalise_secret(s: &str) -> Result<String, BadSecret> {
    let body = s.strip_prefix(PREFIX).unwrap_or(s);
    let ok = (32..=100).contains(&body.len()) && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    if !ok || STANDARD.decode(body).is_err() {
        return Err(BadSecret);
    }
    Ok(format!("{PREFIX}{body}"))
}

/// The `whsec_` text of an HMAC key.
pub fn text(key: &[u8]) -> String {
    format!("{PREFIX}{}", STANDARD.encode(key))
}

/// The HMAC key of a `whsec_` secret.
pub fn key_bytes(secret: &str) -> Result<Vec<u8>, BadSecret> {
    let body = secret.strip_prefix(PREFIX).unwrap_or(secret);
    STANDARD.decode(body).map_err(|_| BadSecret)
}
