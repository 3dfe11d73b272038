//! Endpoint secrets at rest: signing secrets and custom headers (credentials by
//! nature), sealed with the tenant's key and bound to their endpoint, opened only
//! to send (the worker, sync forwarding) or to show.

use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::Utc;
use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    store::{deliveries::ClaimedEndpoint, endpoints},
    AppState,
};
use serde_json::{json, Value};

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

/// The one key of a stored headers object that holds the sealed headers. A
/// leading `:` makes it an invalid header name, so no clear headers object can
/// carry it (as with HTTP/2's pseudo-headers).
pub const SEALED_HEADERS: &str = ":sealed";

/// The key the first sealing release used. It is a valid header name, so an object
/// holding only it is read as sealed only if it opens; otherwise it is a clear
/// header a tenant set before headers were sealed.
const LEGACY_SEALED_HEADERS: &str = "$sealed";

fn headers_purpose(app: &AppId, ep: &EndpointId) -> String {
    format!("endpoint-headers:{app}:{ep}")
}

/// The stored form of an endpoint's custom headers (a JSON object of names to values).
pub fn seal_headers(state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId, headers: &Value) -> Value {
    if headers.as_object().is_none_or(|m| m.is_empty()) {
        return json!({});
    }
    let sealed =
        state.config.master_key.tenant_key(tenant).seal(&headers_purpose(app, ep), headers.to_string().as_bytes());
    json!({ SEALED_HEADERS: STANDARD.encode(sealed) })
}

/// The custom headers, opened from their stored form.
pub fn open_headers(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    stored: &Value,
) -> Result<Value, String> {
    let open = |b64: &str| -> Result<Value, String> {
        let sealed = STANDARD.decode(b64).map_err(|e| e.to_string())?;
        let plain = state
            .config
            .master_key
            .tenant_key(tenant)
            .open(&headers_purpose(app, ep), &sealed)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&plain).map_err(|e| e.to_string())
    };
    if let Some(b64) = stored.get(SEALED_HEADERS).and_then(Value::as_str) {
        return open(b64);
    }
    if let Some(b64) = stored.as_object().filter(|m| m.len() == 1).and_then(|m| m.get(LEGACY_SEALED_HEADERS)) {
        if let Ok(opened) = b64.as_str().ok_or_else(String::new).and_then(open) {
            return Ok(opened);
        }
    }
    Ok(stored.clone())
}

/// Seals the custom headers stored in clear (or under the first release's key),
/// walking every endpoint once at a worker's start. Safe on several instances at
/// once: each row is replaced only if it still holds the value read. A row that
/// cannot be opened is left as it is and logged; the walk goes on past it.
pub async fn seal_stored_headers(state: AppState) {
    let mut after = None;
    let mut sealed = 0usize;
    loop {
        let batch = hookgate_shared::db::bounded(state.db_budget(), async {
            let conn = hookgate_shared::db::conn(&state.db).await?;
            endpoints::unsealed_headers(&**conn, after.as_ref(), 100).await
        })
        .await;
        let rows = match batch {
            Ok(rows) if !rows.is_empty() => rows,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "sealing stored endpoint headers postponed to the next start");
                break;
            }
        };
        for (tenant, app, ep, stored) in &rows {
            let clear = match open_headers(&state, tenant, app, ep, stored) {
                Ok(clear) => clear,
                Err(e) => {
                    tracing::warn!(endpoint = %ep, error = %e, "stored endpoint headers cannot be opened; left as they are");
                    continue;
                }
            };
            let new = seal_headers(&state, tenant, app, ep, &clear);
            let done = hookgate_shared::db::bounded(state.db_budget(), async {
                let conn = hookgate_shared::db::conn(&state.db).await?;
                endpoints::replace_headers(&**conn, tenant, app, ep, stored, &new).await
            })
            .await;
            sealed += usize::from(matches!(done, Ok(true)));
        }
        after = rows.last().map(|(t, a, e, _)| (t.clone(), a.clone(), e.clone()));
    }
    if sealed > 0 {
        tracing::info!(sealed, "sealed endpoint headers stored in clear");
    }
}
