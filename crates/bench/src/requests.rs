//! The requests the load generator sends: a Stripe-signed event to a source,
//! and a timed message to the API.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::sink::now_micros;

pub const STRIPE_SECRET: &str = "whsec_bench";

pub fn stripe_sig(body: &[u8]) -> String {
    let ts = chrono::Utc::now().timestamp();
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(STRIPE_SECRET.as_bytes()).unwrap();
    m.update(ts.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    format!("t={ts},v1={}", hex::encode(m.finalize().into_bytes()))
}

/// `body` POSTed to a source's URL, signed as Stripe signs it now.
pub fn stripe_post(http: &reqwest::Client, url: &str, body: String) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("stripe-signature", stripe_sig(body.as_bytes()))
        .body(body)
}

/// A message whose payload carries the time it was sent (`t`, in µs), from
/// which the sink measures its lag.
pub fn timed_message(http: &reqwest::Client, url: &str, key: &str) -> reqwest::RequestBuilder {
    http.post(url)
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(format!(r#"{{"eventType":"bench","payload":{{"t":{},"k":1}}}}"#, now_micros()))
}
