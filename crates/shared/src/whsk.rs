//! The `whsk_` Ed25519 signing key (Svix's asymmetric endpoint secret, signing
//! Standard Webhooks' `v1a`) and its `whpk_` public key: generated, checked, shown.
//!
//! The 64 bytes after `whsk_` are what Svix stores and accepts (libsodium's and
//! ed25519-compact's secret key): the 32-byte seed, then the 32-byte public key.

use std::sync::Arc;

use base64::{engine::general_purpose::STANDARD, Engine};
use rand::RngCore;
use ring::signature::{Ed25519KeyPair, KeyPair};

pub const SECRET_PREFIX: &str = "whsk_";
pub const PUBLIC_PREFIX: &str = "whpk_";

const SEED_LEN: usize = 32;
const KEY_LEN: usize = 64;

/// Why a given key cannot sign; each says what was wrong with it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadKey {
    #[error("a `whsk_` key must be standard base64 (A-Z, a-z, 0-9, `+`, `/`, `=` padding) after `whsk_`")]
    NotBase64,
    #[error(
        "a `whsk_` key must be base64 of 64 bytes (the 32-byte Ed25519 seed, then its 32-byte public key), \
         not of {0} bytes"
    )]
    WrongLength(usize),
    #[error("a `whsk_` key's last 32 bytes must be the Ed25519 public key of its first 32 (the seed), and are not")]
    NotItsPublicKey,
    #[error("a `whpk_` key is a public key, which verifies but cannot sign: give the `whsk_` secret key")]
    PublicKeyGiven,
    #[error("an Ed25519 key must start with `whsk_`")]
    NoPrefix,
}

/// An endpoint's Ed25519 key pair. Cloning shares it: the worker signs every
/// delivery of a batch with the same key.
#[derive(Clone)]
pub struct SigningKey {
    // ring keeps no seed to give back, and the seed is what is sealed at rest.
    seed: [u8; SEED_LEN],
    pair: Arc<Ed25519KeyPair>,
}

impl std::fmt::Debug for SigningKey {
    // The public half only: a key must never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public_text())
    }
}

impl SigningKey {
    /// A fresh key from 32 random bytes.
    pub fn generate() -> Self {
        let mut seed = [0u8; SEED_LEN];
        rand::rng().fill_bytes(&mut seed);
        Self::from_seed(seed)
    }

    fn from_seed(seed: [u8; SEED_LEN]) -> Self {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).expect("any 32 bytes are an Ed25519 seed");
        Self { seed, pair: Arc::new(pair) }
    }

    /// Reads `whsk_<base64 of seed and public key>`. A key whose public half is
    /// not its seed's is refused rather than trusted: receivers would be given a
    /// public key that verifies none of its signatures.
    pub fn parse(text: &str) -> Result<Self, BadKey> {
        if text.starts_with(PUBLIC_PREFIX) {
            return Err(BadKey::PublicKeyGiven);
        }
        let body = text.strip_prefix(SECRET_PREFIX).ok_or(BadKey::NoPrefix)?;
        let bytes = STANDARD.decode(body).map_err(|_| BadKey::NotBase64)?;
        if bytes.len() != KEY_LEN {
            return Err(BadKey::WrongLength(bytes.len()));
        }
        let (seed, public) = bytes.split_at(SEED_LEN);
        let pair = Ed25519KeyPair::from_seed_and_public_key(seed, public).map_err(|_| BadKey::NotItsPublicKey)?;
        let seed = seed.try_into().expect("split at the seed's length");
        Ok(Self { seed, pair: Arc::new(pair) })
    }

    /// `whsk_` and the 64 bytes, as Svix shows them: what is sealed at rest.
    pub fn to_text(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode([self.seed.as_slice(), self.public_key()].concat()))
    }

    /// `whpk_` and the 32-byte public key: what a receiver verifies with.
    pub fn public_text(&self) -> String {
        format!("{PUBLIC_PREFIX}{}", STANDARD.encode(self.public_key()))
    }

    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The 64-byte Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sign(message).as_ref().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ED25519};

    /// Svix's own test key (server/svix-server: the asymmetric signing test), its
    /// public key as Svix shows it, and the signature Svix's test expects.
    const SVIX_KEY: &str =
        "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const SVIX_PUBLIC: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    const SVIX_SIGNED: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}";
    const SVIX_SIGNATURE: &str =
        "hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

    #[test]
    fn svixs_test_key_reads_back_to_itself_shows_svixs_public_key_and_signs_as_svix_does() {
        let key = SigningKey::parse(SVIX_KEY).unwrap();
        assert_eq!(key.to_text(), SVIX_KEY);
        assert_eq!(key.public_text(), SVIX_PUBLIC);
        assert_eq!(STANDARD.encode(key.sign(SVIX_SIGNED.as_bytes())), SVIX_SIGNATURE);
    }

    #[test]
    fn a_generated_key_reads_back_and_its_signatures_verify_with_its_whpk_key_only() {
        let key = SigningKey::generate();
        let again = SigningKey::parse(&key.to_text()).unwrap();
        assert_eq!(again.to_text(), key.to_text());
        let whpk = key.public_text();
        let public = STANDARD.decode(whpk.strip_prefix("whpk_").unwrap()).unwrap();
        assert_eq!(public.len(), 32);
        let sig = key.sign(b"msg_1.1.{}");
        assert_eq!(sig.len(), 64);
        assert!(UnparsedPublicKey::new(&ED25519, &public).verify(b"msg_1.1.{}", &sig).is_ok());
        assert!(UnparsedPublicKey::new(&ED25519, &public).verify(b"msg_1.1.{ }", &sig).is_err());
        let other = SigningKey::generate().public_key().to_vec();
        assert!(UnparsedPublicKey::new(&ED25519, &other).verify(b"msg_1.1.{}", &sig).is_err());
        assert_ne!(SigningKey::generate().to_text(), key.to_text(), "fresh randomness each time");
    }

    #[test]
    fn a_key_whose_public_half_is_not_its_seeds_is_refused() {
        // Svix's own "bad" key: its test key with bytes of the public half changed.
        let bad = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlaaaaaaaaaaAJ6p9lMicMFs6Kvg==";
        assert_eq!(SigningKey::parse(bad).err(), Some(BadKey::NotItsPublicKey));
        let a = STANDARD.decode(&SigningKey::generate().to_text()[5..]).unwrap();
        let b = STANDARD.decode(&SigningKey::generate().to_text()[5..]).unwrap();
        let mixed = format!("whsk_{}", STANDARD.encode([&a[..32], &b[32..]].concat()));
        assert_eq!(SigningKey::parse(&mixed).err(), Some(BadKey::NotItsPublicKey));
    }

    #[test]
    fn malformed_whsk_and_whpk_forms_are_refused_naming_what_is_wrong() {
        let seed_only = format!("whsk_{}", STANDARD.encode([7u8; 32]));
        assert_eq!(SigningKey::parse(&seed_only).err(), Some(BadKey::WrongLength(32)));
        // One `=` short of its padding, then Svix's own truncated key (three short).
        assert_eq!(SigningKey::parse(&SVIX_KEY[..SVIX_KEY.len() - 1]).err(), Some(BadKey::NotBase64));
        assert!(SigningKey::parse(&SVIX_KEY[..SVIX_KEY.len() - 3]).is_err());
        assert_eq!(SigningKey::parse("whsk_not base64!").err(), Some(BadKey::NotBase64));
        assert_eq!(SigningKey::parse(SVIX_PUBLIC).err(), Some(BadKey::PublicKeyGiven));
        assert_eq!(SigningKey::parse(&SVIX_KEY[5..]).err(), Some(BadKey::NoPrefix));
        let e = BadKey::WrongLength(32).to_string();
        assert!(e.contains("64 bytes") && e.contains("not of 32"), "{e}");
    }
}
