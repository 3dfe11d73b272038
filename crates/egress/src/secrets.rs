//! Endpoint signing secrets at rest: sealed with the tenant's key and bound to
//! their endpoint, opened only to sign (the worker, sync forwarding) or to show.

use chrono::Utc;
use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    store::deliveries::ClaimedEndpoint,
    AppState,
};

use crate::signing;

/// The associated data that binds a sealed secret to its endpoint.
fn purpose(app: &AppId, ep: &EndpointId) -> String {
    format!("endpoint-secret:{app}:{ep}")
}

/// Seals a `whsec_` secret for storage.
pub fn seal(state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId, secret: &str) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&purpose(app, ep), secret.as_bytes())
}

/// Opens a stored secret back to its `whsec_` text.
pub fn open(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    sealed: &[u8],
) -> Result<String, String> {
    let text = state.config.master_key.tenant_key(tenant).open(&purpose(app, ep), sealed).map_err(|e| e.to_string())?;
    String::from_utf8(text).map_err(|e| e.to_string())
}

/// The keys that sign: the current secret, and the previous one during its grace period.
pub fn signing_keys(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    ep: &ClaimedEndpoint,
) -> Result<Vec<Vec<u8>>, String> {
    let key = |sealed: &[u8]| -> Result<Vec<u8>, String> {
        signing::key_bytes(&open(state, tenant, app, endpoint, sealed)?).map_err(|e| e.to_string())
    };
    let mut keys = vec![key(&ep.secret)?];
    if let (Some(old), Some(until)) = (&ep.old_secret, ep.old_secret_until) {
        if until > Utc::now() {
            keys.push(key(old)?);
        }
    }
    Ok(keys)
}
