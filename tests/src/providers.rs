//! Provider signatures for Rust tests, computed as each provider documents them.
//! The Python suite signs with the providers' own libraries instead.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
    parts.iter().for_each(|p| m.update(p));
    m.finalize().into_bytes().to_vec()
}

/// `Stripe-Signature` for `body` at `ts`.
pub fn stripe(secret: &str, ts: i64, body: &[u8]) -> String {
    format!("t={ts},v1={}", hex::encode(mac(secret.as_bytes(), &[ts.to_string().as_bytes(), b".", body])))
}

/// A POST of `body` (JSON) to `url`, signed now as Stripe signs it with `secret`.
pub fn stripe_post(http: &reqwest::Client, url: &str, secret: &str, body: &str) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("Stripe-Signature", stripe(secret, now(), body.as_bytes()))
        .body(body.to_owned())
}

/// `X-Hub-Signature-256`.
pub fn github(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(mac(secret.as_bytes(), &[body])))
}

/// `X-Shopify-Hmac-Sha256`.
pub fn shopify(secret: &str, body: &[u8]) -> String {
    STANDARD.encode(mac(secret.as_bytes(), &[body]))
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}
