//! Source secrets and ingest tokens at rest: sealed with the tenant's key and bound to their
//! source, opened only to verify a request or to show the secret to its tenant.

use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::Utc;
use hookgate_shared::{
    crypto::random_hex,
    ids::{SourceId, TenantId},
    source::{Provider, SecretKind},
    store::sources::Source,
    whsec, AppState,
};

/// The associated data that binds a sealed secret to its source.
fn purpose(id: &SourceId) -> String {
    format!("source-secret:{id}")
}

/// Seals a secret for storage.
pub fn seal(state: &AppState, tenant: &TenantId, id: &SourceId, secret: &str) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&purpose(id), secret.as_bytes())
}

/// The secrets a request may be signed with: the current one, and the previous
/// one during its grace period.
pub fn valid_secrets(state: &AppState, s: &Source) -> Result<Vec<String>, String> {
    let key = state.config.master_key.tenant_key(&s.tenant_id);
    let open = |sealed: &[u8]| {
        key.open(&purpose(&s.id), sealed).map(|b| String::from_utf8_lossy(&b).into_owned()).map_err(|e| e.to_string())
    };
    let mut out = Vec::new();
    if let Some(sealed) = &s.secret {
        out.push(open(sealed)?);
    }
    if let (Some(old), Some(until)) = (&s.old_secret, s.old_secret_until) {
        if until > Utc::now() {
            out.push(open(old)?);
        }
    }
    Ok(out)
}

/// A fresh secret in the provider's format; refused where the provider makes
/// the key (a public key, PayPal's webhook id) and only its value will do.
pub fn generate(provider: &Provider) -> Result<String, String> {
    match provider.secret_kind() {
        SecretKind::Whsec | SecretKind::WhsecOrPublicKey => Ok(whsec::generate_secret()),
        SecretKind::Shared | SecretKind::Nothing => Ok(format!("hgsec_{}", random_hex(24))),
        SecretKind::BasicCredentials => Ok(format!("hookgate:{}", random_hex(24))),
        SecretKind::Ed25519Hex | SecretKind::Ed25519Base64 | SecretKind::P256PublicKey | SecretKind::RsaPublicKey => {
            Err(format!("provider `{}` verifies with its public key: give it as `secret`", provider.name()))
        }
        SecretKind::PaypalWebhookId => Err("provider `paypal` needs its webhook id as `secret`".into()),
    }
}

/// Checks a tenant-given secret for the provider; the error names what is wrong.
pub fn check(provider: &Provider, secret: &str) -> Result<String, String> {
    // Keys are trimmed (pasted from a dashboard); shared secrets are taken as given.
    let key = secret.trim();
    let bad = |what: &str| Err(format!("`secret` for provider `{}` must be {what}", provider.name()));
    match provider.secret_kind() {
        SecretKind::Whsec => whsec::normalise_secret(secret).map_err(|e| e.to_string()),
        SecretKind::WhsecOrPublicKey => match key.strip_prefix("whpk_") {
            Some(pk) if STANDARD.decode(pk).is_ok_and(|k| crate::verify::ed25519_key_ok(&k)) => Ok(key.to_owned()),
            Some(_) => {
                bad("a `whsec_` secret or a `whpk_` Ed25519 public key (base64 of 32 bytes, not a small-order point)")
            }
            None => whsec::normalise_secret(secret).map_err(|e| e.to_string()),
        },
        SecretKind::Ed25519Hex => match hex::decode(key) {
            Ok(k) if crate::verify::ed25519_key_ok(&k) => Ok(key.to_ascii_lowercase()),
            _ => bad("the application's public key: 64 hex characters (an Ed25519 key, not a small-order point)"),
        },
        SecretKind::Ed25519Base64 => match STANDARD.decode(key) {
            Ok(k) if crate::verify::ed25519_key_ok(&k) => Ok(key.to_owned()),
            _ => bad("the account's public key: base64 of 32 bytes (an Ed25519 key, not a small-order point)"),
        },
        SecretKind::P256PublicKey => match crate::verify::p256_key_ok(key) {
            true => Ok(key.to_owned()),
            false => bad("the verification key SendGrid shows: a base64 ECDSA P-256 public key"),
        },
        SecretKind::RsaPublicKey => match crate::verify::rsa_public_key(key) {
            Some(_) => Ok(key.to_owned()),
            None => bad(
                "the public key Orum's `webhooks/secret` returns: an RSA key of 2048 bits or more, PEM or base64 DER",
            ),
        },
        SecretKind::PaypalWebhookId => {
            match !key.is_empty() && key.len() <= 64 && key.bytes().all(|c| c.is_ascii_alphanumeric()) {
                true => Ok(key.to_owned()),
                false => bad("the webhook's id as PayPal shows it (letters and digits)"),
            }
        }
        SecretKind::BasicCredentials => match secret.split_once(':') {
            Some((user, pass)) if !user.is_empty() && !pass.is_empty() && secret.len() <= 512 => Ok(secret.to_owned()),
            _ => bad("`user:password`, as the sender sends them"),
        },
        SecretKind::Shared | SecretKind::Nothing => {
            if secret.is_empty() || secret.len() > 512 {
                return Err("`secret` must be 1 to 512 characters".into());
            }
            Ok(secret.to_owned())
        }
    }
}

/// The token of an ingest source's `ingestUrl`: 192 random bits, in hex.
pub fn new_ingest_token() -> String {
    hookgate_shared::crypto::random_hex(24)
}

fn token_purpose(id: &SourceId) -> String {
    format!("ingest-token:{id}")
}

/// An ingest token sealed for storage (the `ingestUrl` is shown again).
pub fn seal_token(state: &AppState, tenant: &TenantId, id: &SourceId, token: &str) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&token_purpose(id), token.as_bytes())
}

/// The current token of an ingest source, opened.
pub fn open_token(state: &AppState, s: &Source) -> Result<Option<String>, String> {
    let Some(ingest) = &s.ingest else { return Ok(None) };
    let key = state.config.master_key.tenant_key(&s.tenant_id);
    let plain = key.open(&token_purpose(&s.id), &ingest.token).map_err(|e| format!("ingest token: {e}"))?;
    String::from_utf8(plain).map(Some).map_err(|_| "ingest token: not UTF-8".to_owned())
}

/// Whether `presented` opens this ingest source: its current token, or one rotated
/// out and still within its grace. Compared by hash (peppered), in constant time.
pub fn token_accepted(state: &AppState, s: &Source, presented: &str) -> bool {
    let Some(ingest) = &s.ingest else { return false };
    let hash = state.api_keys.hash(presented);
    let now = chrono::Utc::now();
    hookgate_shared::crypto::secrets_equal(&hash, &ingest.token_hash)
        || ingest.old_tokens.iter().any(|old| {
            old.until > now
                && hookgate_shared::crypto::secrets_equal(hex::encode(&hash).as_bytes(), old.hash.as_bytes())
        })
}

/// Whether `presented` is the verify token of this source's subscription check
/// (Meta's): compared by its hash (peppered), kept in the source's settings.
pub fn verify_token_accepted(state: &AppState, s: &Source, presented: &str) -> bool {
    let Some(stored) = s.ingest.as_ref().and_then(|i| i.config.get(VERIFY_TOKEN_HASH)).and_then(|v| v.as_str()) else {
        return false;
    };
    let hash = verify_token_hash(state, presented);
    hookgate_shared::crypto::secrets_equal(hash.as_bytes(), stored.as_bytes())
}

/// The hash a verify token is kept as (hex of its peppered hash).
pub fn verify_token_hash(state: &AppState, token: &str) -> String {
    hex::encode(state.api_keys.hash(token))
}

/// Where an ingest source's settings keep the hash of its verify token; never shown.
pub const VERIFY_TOKEN_HASH: &str = "verifyTokenHash";
