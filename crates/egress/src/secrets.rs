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

use crate::signing::EndpointSecret;

/// Custom headers shown by name only, in the API and in attempt records: their
/// values are credentials.
pub const SENSITIVE_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie", "x-api-key"];

/// The headers Hookgate itself sets: the only ones an attempt records with their
/// values. A custom header may carry a credential under any name (`X-Token`,
/// `Api-Key`, …) and is kept sealed at rest, so its value is never copied out.
pub const OWN_HEADERS: &[&str] = &[
    "content-type",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "idempotency-key",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
];

/// At most this many headers are recorded per attempt.
const RECORDED_MAX: usize = 64;

/// The headers a request goes with, as an attempt records them: Hookgate's own
/// with their values, every other one by name only (`[redacted]`).
pub fn recorded_headers(headers: &reqwest::header::HeaderMap) -> String {
    let shown: serde_json::Map<String, Value> = headers
        .iter()
        .take(RECORDED_MAX)
        .map(|(name, value)| {
            let own = OWN_HEADERS.contains(&name.as_str()) && !SENSITIVE_HEADERS.contains(&name.as_str());
            let value = match own {
                true => String::from_utf8_lossy(value.as_bytes()).into_owned(),
                false => "[redacted]".to_owned(),
            };
            (name.as_str().to_owned(), Value::String(value))
        })
        .collect();
    Value::Object(shown).to_string()
}

/// The associated data that binds a sealed secret to its endpoint.
fn purpose(app: &AppId, ep: &EndpointId) -> String {
    format!("endpoint-secret:{app}:{ep}")
}

/// Seals an endpoint secret for storage: its text, `whsec_…` or `whsk_…` (an
/// Ed25519 key's secret half is never stored otherwise).
pub fn seal(state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId, secret: &EndpointSecret) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&purpose(app, ep), secret.secret_text().as_bytes())
}

/// Opens a stored secret back to its text, `whsec_…` or `whsk_…`.
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

/// Opens a stored secret and reads it, of whichever kind.
pub fn open_secret(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    sealed: &[u8],
) -> Result<EndpointSecret, String> {
    EndpointSecret::from_stored(&open(state, tenant, app, ep, sealed)?).map_err(|e| e.to_string())
}

/// The secrets that sign: the current one, and the previous one during its
/// grace period, whatever the kind of each (a rotation may change it).
pub fn signing_keys(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    ep: &ClaimedEndpoint,
) -> Result<Vec<EndpointSecret>, String> {
    let key = |sealed: &[u8]| open_secret(state, tenant, app, endpoint, sealed);
    let mut keys = vec![key(&ep.secret)?];
    if let (Some(old), Some(until)) = (&ep.old_secret, ep.old_secret_until) {
        if until > Utc::now() {
            keys.push(key(old)?);
        }
    }
    Ok(keys)
}

/// The one key of a stored headers object that holds the sealed headers:
/// `{"$sealed": "<base64>"}`, the form every release since sealing writes and
/// reads (so old and new processes can run side by side, and roll back).
///
/// `$sealed` is a valid header name, so a clear object holding only it, stored
/// before sealing, looks alike: such an object is sealed only if it opens, or
/// if its value is too short to be a ciphertext (then it is clear headers).
pub const SEALED_HEADERS: &str = "$sealed";

/// Nonce and tag: no sealed value is shorter.
const MIN_SEALED_LEN: usize = 12 + 16;

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

/// The form of a stored headers object.
enum Stored<'a> {
    /// `{"$sealed": "<base64>"}` whose value could be a ciphertext.
    Sealed(&'a [u8]),
    /// Anything else: clear headers, stored before sealing.
    Clear,
}

fn stored_form(stored: &Value) -> Stored<'_> {
    let sole = stored.as_object().filter(|m| m.len() == 1).and_then(|m| m.get(SEALED_HEADERS)?.as_str());
    match sole {
        Some(b64) if b64.len() >= MIN_SEALED_LEN * 4 / 3 => Stored::Sealed(b64.as_bytes()),
        _ => Stored::Clear,
    }
}

/// The custom headers, opened from their stored form. A sealed form that does
/// not open (another master key) is an error, never sent as a header.
pub fn open_headers(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    stored: &Value,
) -> Result<Value, String> {
    let Stored::Sealed(b64) = stored_form(stored) else { return Ok(stored.clone()) };
    let open = || -> Result<Value, String> {
        let sealed = STANDARD.decode(b64).map_err(|e| e.to_string())?;
        let plain = state
            .config
            .master_key
            .tenant_key(tenant)
            .open(&headers_purpose(app, ep), &sealed)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&plain).map_err(|e| e.to_string())
    };
    open()
        .map_err(|e| format!("the endpoint's sealed headers cannot be opened (was HOOKGATE_MASTER_KEY changed?): {e}"))
}

/// Seals the custom headers stored in clear before sealing, walking every
/// endpoint once at a worker's start. Safe on several instances at once: each
/// row is replaced only if it still holds the value read. Rows already in the
/// sealed form are never touched, whether or not this process can open them.
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
            if matches!(stored_form(stored), Stored::Sealed(_)) {
                continue;
            }
            let new = seal_headers(&state, tenant, app, ep, stored);
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

fn variables_purpose(app: &AppId, ep: &EndpointId) -> String {
    format!("endpoint-transformation-variables:{app}:{ep}")
}

/// The stored form of a transformation's variables (a JSON object of strings, which
/// may hold credentials): sealed with the tenant's key, bound to the endpoint.
pub fn seal_variables(state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId, vars: &Value) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&variables_purpose(app, ep), vars.to_string().as_bytes())
}

/// A transformation's variables, opened; `{}` when none were stored.
pub fn open_variables(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    sealed: Option<&[u8]>,
) -> Result<Value, String> {
    let Some(sealed) = sealed else { return Ok(json!({})) };
    let plain = state
        .config
        .master_key
        .tenant_key(tenant)
        .open(&variables_purpose(app, ep), sealed)
        .map_err(|e| format!("transformation variables cannot be opened: {e}"))?;
    serde_json::from_slice(&plain).map_err(|e| format!("transformation variables are not JSON: {e}"))
}

/// Recorded request headers as the API shows them: Hookgate's own with their
/// values, every other by name only. Attempts of an earlier release kept custom
/// header values in clear; this never shows them.
pub fn shown_headers(recorded: serde_json::Value) -> serde_json::Value {
    match recorded {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(name, value)| {
                let lower = name.to_ascii_lowercase();
                let own = OWN_HEADERS.contains(&lower.as_str()) && !SENSITIVE_HEADERS.contains(&lower.as_str());
                (name, if own { value } else { serde_json::Value::String("[redacted]".into()) })
            })
            .collect(),
        other => other,
    }
}
