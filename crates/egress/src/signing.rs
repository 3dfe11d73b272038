//! Standard Webhooks signatures over `"id.timestamp.body"`, one entry per valid
//! secret: `v1,<base64 HMAC-SHA256>` with a `whsec_` secret, `v1a,<base64 Ed25519>`
//! with a `whsk_` key (the receiver verifies it with the `whpk_` public key).

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use hookgate_shared::endpoint_secret::{EndpointSecret, SecretError, SignatureType};

/// One signature entry: `v1,<base64>` or `v1a,<base64>`, by the secret's kind.
pub fn sign(secret: &EndpointSecret, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    let parts = [msg_id.as_bytes(), b".", ts.as_bytes(), b".", body];
    match secret {
        EndpointSecret::Hmac(key) => {
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            parts.iter().for_each(|p| mac.update(p));
            format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
        }
        EndpointSecret::Ed25519(key) => format!("v1a,{}", STANDARD.encode(key.sign(&parts.concat()))),
    }
}

/// The `webhook-signature` value: one entry per secret, space-separated, so a
/// receiver holding any one of them (HMAC or Ed25519, old or new) verifies.
pub fn signature_header(secrets: &[EndpointSecret], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().map(|s| sign(s, msg_id, timestamp, body)).collect::<Vec<_>>().join(" ")
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
            let secret = EndpointSecret::from_stored(&v.secret).unwrap();
            assert_eq!(sign(&secret, &v.msg_id, v.timestamp, v.payload.as_bytes()), v.signature);
        }
    }

    #[test]
    fn generated_secrets_are_accepted_back() {
        use hookgate_shared::whsec::{generate_secret, key_bytes, normalise_secret};
        let s = generate_secret();
        assert_eq!(normalise_secret(&s).unwrap(), s);
        assert_eq!(key_bytes(&s).unwrap().len(), 24);
    }

    #[test]
    fn secrets_without_prefix_are_normalised_and_bad_ones_refused() {
        use hookgate_shared::whsec::{normalise_secret, BadSecret};
        let body = "C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        assert_eq!(normalise_secret(body).unwrap(), format!("whsec_{body}"));
        assert_eq!(normalise_secret("whsec_short"), Err(BadSecret));
        assert_eq!(normalise_secret("whsec_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"), Err(BadSecret));
    }

    #[test]
    fn a_rotation_signs_with_every_key() {
        let h = signature_header(
            &[EndpointSecret::Hmac(vec![1; 24]), EndpointSecret::Hmac(vec![2; 24])],
            "msg_1",
            1,
            b"{}",
        );
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_ne!(parts[0], parts[1]);
        assert!(parts.iter().all(|p| p.starts_with("v1,")));
    }

    #[test]
    fn a_whsk_key_signs_v1a_as_svixs_own_test_expects() {
        // Svix's asymmetric signing test (server/svix-server/src/worker.rs): its key,
        // message and the one signature Ed25519 gives for them.
        let key = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
        let secret = EndpointSecret::parse(key).unwrap();
        assert_eq!(
            sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#),
            "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
        );
    }

    #[test]
    fn a_rotation_from_hmac_to_ed25519_signs_with_both_each_in_its_own_version() {
        use ring::signature::{UnparsedPublicKey, ED25519};
        let old = EndpointSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let new = EndpointSecret::generate(SignatureType::Ed25519);
        let h = signature_header(&[new.clone(), old.clone()], "msg_1", 1000, b"{}");
        let (v1a, v1) = h.split_once(' ').expect("two entries");
        assert_eq!(v1, sign(&old, "msg_1", 1000, b"{}"));
        let sig = STANDARD.decode(v1a.strip_prefix("v1a,").expect("the Ed25519 entry first")).unwrap();
        let public = STANDARD.decode(new.shown().strip_prefix("whpk_").unwrap()).unwrap();
        assert!(UnparsedPublicKey::new(&ED25519, public).verify(b"msg_1.1000.{}", &sig).is_ok());
    }
}
