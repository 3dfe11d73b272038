//! Source secrets at rest: sealed with the tenant's key and bound to their
//! source, opened only to verify a request or to show the secret to its tenant.

use chrono::Utc;
use hookgate_shared::{
    crypto::random_hex,
    ids::{SourceId, TenantId},
    source::Provider,
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

/// A fresh secret in the provider's format.
pub fn generate(provider: &Provider) -> String {
    if provider.uses_whsec() {
        whsec::generate_secret()
    } else {
        format!("hgsec_{}", random_hex(24))
    }
}

/// Checks a tenant-given secret for the provider; the error names what is wrong.
pub fn check(provider: &Provider, secret: &str) -> Result<String, String> {
    if provider.uses_whsec() {
        return whsec::normalise_secret(secret).map_err(|e| e.to_string());
    }
    if secret.is_empty() || secret.len() > 512 {
        return Err("`secret` must be 1 to 512 characters".into());
    }
    Ok(secret.to_owned())
}
