//! Key derivation from the master key, encryption of stored secrets, API key hashing.
//!
//! One root, `HOOKGATE_MASTER_KEY`, and HKDF-SHA256 with a distinct `info` per use:
//! a per-tenant key seals that tenant's secrets (ChaCha20-Poly1305, random nonce,
//! the secret's purpose as associated data, so a ciphertext cannot be moved to
//! another row), and a separate key peppers API key hashes.

use base64::{engine::general_purpose::STANDARD, Engine};
use chacha20poly1305::{
    aead::{Aead, KeyInit, Payload},
    ChaCha20Poly1305, Key, Nonce,
};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::ids::{ApiKeyId, TenantId};

const SALT: &[u8] = b"hookgate/v1";
const NONCE_LEN: usize = 12;

/// The 32-byte root of all derived keys.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("not valid base64")]
    NotBase64,
    #[error("must decode to 32 bytes, got {0}")]
    WrongLength(usize),
    #[error("stored secret cannot be decrypted with this master key")]
    Undecryptable,
}

impl MasterKey {
    pub fn from_base64(s: &str) -> Result<Self, CryptoError> {
        let bytes = STANDARD.decode(s.trim()).map_err(|_| CryptoError::NotBase64)?;
        let arr: [u8; 32] = bytes.as_slice().try_into().map_err(|_| CryptoError::WrongLength(bytes.len()))?;
        Ok(Self(arr))
    }

    /// A fresh random key, base64-encoded, for `make run` and tests.
    pub fn generate_base64() -> String {
        let mut k = [0u8; 32];
        rand::rng().fill_bytes(&mut k);
        STANDARD.encode(k)
    }

    fn derive(&self, info: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        Hkdf::<Sha256>::new(Some(SALT), &self.0)
            .expand(info, &mut out)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        out
    }

    /// The key that seals one tenant's stored secrets.
    pub fn tenant_key(&self, tenant: &TenantId) -> TenantKey {
        let info = [b"tenant-secrets:".as_slice(), tenant.as_str().as_bytes()].concat();
        TenantKey(self.derive(&info))
    }

    /// The key that seals the responses kept for `Idempotency-Key` replays of one
    /// scope (a tenant, or the operator): they may carry API keys and secrets.
    pub fn replay_key(&self, scope: &str) -> TenantKey {
        let info = [b"idempotency-replay:".as_slice(), scope.as_bytes()].concat();
        TenantKey(self.derive(&info))
    }

    /// The key that signs app-portal tokens.
    pub fn portal_signer(&self) -> PortalSigner {
        PortalSigner(self.derive(b"portal-token"))
    }

    /// The pepper of API key hashes.
    pub fn api_key_hasher(&self) -> ApiKeyHasher {
        ApiKeyHasher(self.derive(b"api-key-hash"))
    }

    /// The root of the per-tenant keys that key inbound dedupe digests.
    pub fn inbound_keyer(&self) -> InboundKeyer {
        InboundKeyer(self.derive(b"inbound-key"))
    }
}

/// Keys an inbound event's plain dedupe digest per tenant, so that what is
/// stored (and shown) cannot confirm a guessed provider id without the master key.
#[derive(Clone)]
pub struct InboundKeyer([u8; 32]);

impl InboundKeyer {
    /// `HMAC(k_t, plain)` in hex, where `k_t = HMAC(root, tenant)` is the tenant's
    /// own key. A function of the plain digest, so a stored plain key can be keyed
    /// later without the provider id it came from.
    pub fn keyed(&self, tenant: &TenantId, plain: &str) -> String {
        let mut per_tenant = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        per_tenant.update(tenant.as_str().as_bytes());
        let k_t = per_tenant.finalize().into_bytes();
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&k_t).expect("HMAC takes any key length");
        mac.update(plain.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The key that seals secrets in an environment document (export and import):
/// the operator's `HOOKGATE_TRANSIT_KEY`, never a tenant's, so a document can be
/// kept and moved without its secrets in clear, and only an installation given
/// the same key opens them.
#[derive(Clone)]
pub struct TransitKey([u8; 32]);

impl TransitKey {
    pub fn from_base64(given: &str) -> Result<Self, CryptoError> {
        Ok(TransitKey(MasterKey::from_base64(given)?.derive(b"environment-transit")))
    }

    pub fn seal(&self, purpose: &str, plaintext: &[u8]) -> Vec<u8> {
        TenantKey(self.0).seal(purpose, plaintext)
    }

    pub fn open(&self, purpose: &str, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        TenantKey(self.0).open(purpose, sealed)
    }
}

/// A per-tenant AEAD key.
pub struct TenantKey([u8; 32]);

impl TenantKey {
    /// Encrypts `plaintext`; `purpose` (e.g. `endpoint-secret:ep_…`) is bound as associated data.
    pub fn seal(&self, purpose: &str, plaintext: &[u8]) -> Vec<u8> {
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.0));
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let ct = cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad: purpose.as_bytes() })
            .expect("ChaCha20-Poly1305 encryption does not fail for in-memory buffers");
        [nonce.as_slice(), &ct].concat()
    }

    pub fn open(&self, purpose: &str, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < NONCE_LEN {
            return Err(CryptoError::Undecryptable);
        }
        let (nonce, ct) = sealed.split_at(NONCE_LEN);
        ChaCha20Poly1305::new(Key::from_slice(&self.0))
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: purpose.as_bytes() })
            .map_err(|_| CryptoError::Undecryptable)
    }
}

/// Hashes API keys with a pepper, so a leaked table does not allow offline guessing
/// without the master key. Keys are 256 random bits, so a fast hash is enough.
#[derive(Clone)]
pub struct ApiKeyHasher([u8; 32]);

impl ApiKeyHasher {
    pub fn hash(&self, key: &str) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(key.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

/// Signs and checks app-portal tokens: `hgp_<hex claims>_<hex MAC>`, stateless,
/// scoped to one tenant's one application, with an expiry.
#[derive(Clone)]
pub struct PortalSigner([u8; 32]);

/// What a portal token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalClaims {
    pub tenant: TenantId,
    pub app_id: String,
    pub app_uid: Option<String>,
    pub expires: i64,
    /// Svix's `featureFlags`: event types behind one of these flags are visible
    /// to the token, those behind another flag are not.
    pub feature_flags: Vec<String>,
    /// Svix's `readOnly`: the token may read, never change.
    pub read_only: bool,
    /// Svix's message token (`create-message-token`): the token may create
    /// messages in its application, and nothing else.
    pub message_only: bool,
    /// Svix's poller token: the token may poll this polling endpoint (its id)
    /// while this generation of its token is live, and nothing else.
    pub poller: Option<(String, i32)>,
    /// The API key that minted it: the token lives only while that key does, so
    /// revoking a leaked key revokes every token it minted.
    pub key: ApiKeyId,
    /// Svix's `sessionId` ('' none): `expire-all` may name it.
    pub session: String,
    /// When it was made, in milliseconds since the epoch (0 for a token made
    /// before tokens said): `expire-all` refuses those made before it.
    pub issued_ms: i64,
}

/// A portal token's own id (a hash of it, never the token): what a logout records.
pub fn portal_token_id(token: &str) -> String {
    hex::encode(&Sha256::digest(token.as_bytes())[..16])
}

impl PortalSigner {
    fn mac(&self, claims: &[u8]) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(claims);
        mac.finalize().into_bytes().to_vec()
    }

    pub fn issue(&self, c: &PortalClaims) -> String {
        // One kind per token: a message or poller token is never also read-only.
        debug_assert!(!(c.read_only && c.message_only) && (c.poller.is_none() || !(c.read_only || c.message_only)));
        // Nine lines: tenant, application id, its uid, expiry, feature flags,
        // `ro`, `msg`, `poll/{endpoint}/{generation}` or nothing, the minting
        // key's id, the session, when it was made. A release before `msg` and
        // `poll/…` refuses such a token (it fails closed).
        let claims = format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
            c.tenant,
            c.app_id,
            c.app_uid.as_deref().unwrap_or(""),
            c.expires,
            c.feature_flags.join(","),
            match (&c.poller, c.read_only, c.message_only) {
                (Some((ep, generation)), _, _) => format!("poll/{ep}/{generation}"),
                (None, true, _) => "ro".to_owned(),
                (None, false, true) => "msg".to_owned(),
                (None, false, false) => String::new(),
            },
            c.key,
            c.session,
            c.issued_ms
        );
        format!("hgp_{}_{}", hex::encode(&claims), hex::encode(self.mac(claims.as_bytes())))
    }

    /// The claims of a genuine, unexpired token; `None` otherwise. A token made
    /// before tokens named their key (four to six lines) is refused: nothing
    /// could revoke it before it expired.
    pub fn verify(&self, token: &str, now: i64) -> Option<PortalClaims> {
        let (claims_hex, mac_hex) = token.strip_prefix("hgp_")?.split_once('_')?;
        // Lower-case only, as issued: one token has one spelling, so what a
        // logout records (`portal_token_id`, a hash of the text) names every use of it.
        if [claims_hex, mac_hex].iter().any(|h| h.bytes().any(|b| b.is_ascii_uppercase())) {
            return None;
        }
        let claims = hex::decode(claims_hex).ok()?;
        let mac = hex::decode(mac_hex).ok()?;
        if !secrets_equal(&mac, &self.mac(&claims)) {
            return None;
        }
        let text = String::from_utf8(claims).ok()?;
        let mut parts = text.split('\n');
        let tenant = TenantId::parse(parts.next()?).ok()?;
        let app_id = parts.next()?.to_owned();
        let app_uid = Some(parts.next()?.to_owned()).filter(|u| !u.is_empty());
        let expires: i64 = parts.next()?.parse().ok()?;
        let feature_flags = parts.next()?.split(',').filter(|f| !f.is_empty()).map(str::to_owned).collect();
        let (read_only, message_only, poller) = match parts.next()? {
            "ro" => (true, false, None),
            "msg" => (false, true, None),
            "" => (false, false, None),
            mode => {
                let (ep, generation) = mode.strip_prefix("poll/")?.split_once('/')?;
                if ep.is_empty() || !ep.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    return None;
                }
                (false, false, Some((ep.to_owned(), generation.parse().ok()?)))
            }
        };
        let key = ApiKeyId::parse(parts.next()?).ok()?;
        // Tokens of seven lines, made before sessions: no session, made at 0.
        let session = parts.next().unwrap_or("").to_owned();
        let issued_ms: i64 = match parts.next() {
            Some(ms) => ms.parse().ok()?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        let claims = PortalClaims {
            tenant,
            app_id,
            app_uid,
            expires,
            feature_flags,
            read_only,
            message_only,
            poller,
            key,
            session,
            issued_ms,
        };
        (expires > now).then_some(claims)
    }
}

/// Random bytes as lowercase hex: the secret part of API keys and tokens.
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// Compares two secrets in time that does not depend on where they differ.
/// Hashing first hides the length of the expected value too.
pub fn secrets_equal(a: &[u8], b: &[u8]) -> bool {
    Sha256::digest(a).ct_eq(&Sha256::digest(b)).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MasterKey {
        MasterKey::from_base64(&MasterKey::generate_base64()).unwrap()
    }

    #[test]
    fn an_inbound_key_is_keyed_per_tenant_as_an_independent_hmac_computes_it() {
        // Computed with Python's hmac and hashlib: HKDF-SHA256(salt "hookgate/v1",
        // info "inbound-key"), then HMAC(HMAC(root, tenant), plain).
        let mk = MasterKey::from_base64("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
        let plain = "ec189fb16b7cff0ae09085b192f1c97631c8bc0d848c0c53c855491b32cc1910";
        let keyed = mk.inbound_keyer().keyed(&TenantId::from_db("tnt_A".into()), plain);
        assert_eq!(keyed, "6ae8ec27ef624163fdf52f17bef5bbb63a175d0368f5cc0a21a4c2aed28536dc");
        assert_ne!(keyed, mk.inbound_keyer().keyed(&TenantId::from_db("tnt_B".into()), plain));
        assert_ne!(keyed, key().inbound_keyer().keyed(&TenantId::from_db("tnt_A".into()), plain));
    }

    #[test]
    fn a_sealed_secret_opens_with_the_same_tenant_and_purpose_only() {
        let mk = key();
        let t1 = TenantId::generate();
        let t2 = TenantId::generate();
        let sealed = mk.tenant_key(&t1).seal("endpoint-secret:ep_1", b"whsec_abc");
        assert_eq!(mk.tenant_key(&t1).open("endpoint-secret:ep_1", &sealed).unwrap(), b"whsec_abc");
        assert_eq!(mk.tenant_key(&t2).open("endpoint-secret:ep_1", &sealed), Err(CryptoError::Undecryptable));
        assert_eq!(mk.tenant_key(&t1).open("endpoint-secret:ep_2", &sealed), Err(CryptoError::Undecryptable));
        assert_eq!(key().tenant_key(&t1).open("endpoint-secret:ep_1", &sealed), Err(CryptoError::Undecryptable));
    }

    #[test]
    fn sealing_twice_gives_different_ciphertexts() {
        let mk = key();
        let t = TenantId::generate();
        let tk = mk.tenant_key(&t);
        assert_ne!(tk.seal("p", b"x"), tk.seal("p", b"x"));
    }

    #[test]
    fn key_derivation_matches_a_fixed_vector() {
        // Computed independently (Python's hmac/hashlib HKDF): a fixed master key
        // must keep deriving the same keys, or every stored secret becomes unreadable.
        let mk = MasterKey([7u8; 32]);
        let t = TenantId::from_db("tnt_01J00000000000000000000000".into());
        assert_eq!(
            hex::encode(mk.tenant_key(&t).0),
            "75ed1748258becbbc9e904a981b0466dd3777fa84fa7f65fd2ae0ce9a4ae93f5"
        );
        assert_eq!(
            hex::encode(mk.api_key_hasher().hash("hgk_x")),
            "750b10c43e85933d3857b2ac29c14b2e0e0ee00870d76ab72a14d9f3530a491b"
        );
        assert_ne!(mk.api_key_hasher().hash("hgk_x"), mk.api_key_hasher().hash("hgk_y"));
    }

    #[test]
    fn master_keys_must_be_32_bytes_of_base64() {
        assert_eq!(MasterKey::from_base64("not base64!").err(), Some(CryptoError::NotBase64));
        assert_eq!(MasterKey::from_base64("c2hvcnQ=").err(), Some(CryptoError::WrongLength(5)));
    }

    #[test]
    fn a_portal_token_verifies_until_it_expires_and_not_when_altered() {
        let signer = key().portal_signer();
        let claims = PortalClaims {
            tenant: TenantId::generate(),
            app_id: "app_x".into(),
            app_uid: Some("my-app".into()),
            expires: 1000,
            feature_flags: vec!["beta".into(), "v2.preview".into()],
            read_only: false,
            message_only: false,
            poller: None,
            key: ApiKeyId::generate(),
            session: "user@1".into(),
            issued_ms: 1_700_000_000_123,
        };
        let token = signer.issue(&claims);
        assert_eq!(signer.verify(&token, 999), Some(claims.clone()));
        assert_eq!(signer.verify(&token, 1000), None, "expired");
        let mut forged = token.clone();
        forged.replace_range(5..7, "00");
        assert_eq!(signer.verify(&forged, 0), None);
        assert_eq!(signer.verify(&token.to_ascii_uppercase().replacen("HGP_", "hgp_", 1), 999), None, "one spelling");
        assert_eq!(key().portal_signer().verify(&token, 0), None, "another master key");
        let read_only = PortalClaims { feature_flags: vec![], read_only: true, ..claims.clone() };
        assert_eq!(signer.verify(&signer.issue(&read_only), 0), Some(read_only));
        let plain = PortalClaims { feature_flags: vec![], ..claims.clone() };
        assert_eq!(signer.verify(&signer.issue(&plain), 0), Some(plain));
        let message = PortalClaims { feature_flags: vec![], message_only: true, ..claims.clone() };
        assert_eq!(signer.verify(&signer.issue(&message), 0), Some(message));
        let poller = PortalClaims { feature_flags: vec![], poller: Some(("ep_1".into(), 3)), ..claims.clone() };
        assert_eq!(signer.verify(&signer.issue(&poller), 0), Some(poller));
        // A token of the former shape, which named no key, is refused.
        let old = format!("{}\n{}\n{}\n{}", claims.tenant, claims.app_id, "my-app", 1000);
        let old = format!("hgp_{}_{}", hex::encode(&old), hex::encode(signer.mac(old.as_bytes())));
        assert_eq!(signer.verify(&old, 0), None, "a token bound to no key");
        // A token of seven lines (before sessions) verifies, made at 0.
        let seven = format!("{}\n{}\n\n1000\n\n\n{}", claims.tenant, claims.app_id, claims.key);
        let seven = format!("hgp_{}_{}", hex::encode(&seven), hex::encode(signer.mac(seven.as_bytes())));
        let read = signer.verify(&seven, 0).expect("a seven-line token verifies");
        assert_eq!((read.session.as_str(), read.issued_ms), ("", 0));
    }

    #[test]
    fn secret_comparison_tells_equal_from_unequal() {
        assert!(secrets_equal(b"abc", b"abc"));
        assert!(!secrets_equal(b"abc", b"abd"));
        assert!(!secrets_equal(b"abc", b"abcd"));
    }
}
