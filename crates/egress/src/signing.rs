//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
//! with the endpoint's `whsec_` secret, one entry per valid secret.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use hookgate_shared::whsec::{generate_secret, key_bytes, normalise_secret, BadSecret};

/// One signature entry, `v1,<base64>`.
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` value: one entry per key, space-separated.
pub fn signature_header(keys: &[Vec<u8>], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter().map(|k| sign(k, msg_id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Vector {
        secret: String,
        msg_id: String,
        timestamp: i64,
        payload: String,
        signature: String,
    }

    #[test]
    fn signatures_reproduce_the_standard_webhooks_vectors() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/standard-webhooks-vectors.json");
        let vectors: Vec<Vector> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert!(!vectors.is_empty());
        for v in vectors {
            let key = key_bytes(&v.secret).unwrap();
            assert_eq!(sign(&key, &v.msg_id, v.timestamp, v.payload.as_bytes()), v.signature);
        }
    }

    #[test]
    fn generated_secrets_are_accepted_back() {
        let s = generate_secret();
        assert_eq!(normalise_secret(&s).unwrap(), s);
        assert_eq!(key_bytes(&s).unwrap().len(), 24);
    }

    #[test]
    fn secrets_without_prefix_are_normalised_and_bad_ones_refused() {
        let body = "C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        assert_eq!(normalise_secret(body).unwrap(), format!("whsec_{body}"));
        assert_eq!(normalise_secret("whsec_short"), Err(BadSecret));
        assert_eq!(normalise_secret("whsec_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"), Err(BadSecret));
    }

    #[test]
    fn a_rotation_signs_with_every_key() {
        let h = signature_header(&[vec![1; 24], vec![2; 24]], "msg_1", 1, b"{}");
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_ne!(parts[0], parts[1]);
        assert!(parts.iter().all(|p| p.starts_with("v1,")));
    }
}
