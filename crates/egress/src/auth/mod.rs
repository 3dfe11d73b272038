//! How Hookgate authenticates to an endpoint beyond its signature: an OAuth 2
//! client whose access token goes as `Authorization: Bearer` ([`oauth`], shared
//! by every worker through [`tokens`]), and a client certificate and server CA
//! for TLS ([`tls`]). The settings are checked here, sealed with the tenant's key
//! at rest, and read by the worker through a cache keyed by the endpoint's `auth_at`.

pub mod oauth;
pub mod tls;
pub mod tokens;

use std::{collections::HashMap, sync::Arc, sync::Mutex};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    ids::{AppId, EndpointId, TenantId},
    store::endpoint_auth,
    AppState,
};

pub use hookgate_shared::endpoint_auth::{AuthMethod, GrantType, OauthSecrets, OauthSettings};

/// What an endpoint authenticates with, opened for sending (its `Debug` shows no secret).
#[derive(Debug)]
pub struct Loaded {
    /// The settings' `changed_at`.
    pub at: DateTime<Utc>,
    /// The OAuth client's `oauth_at`: what a token fetched for it is kept under.
    pub oauth_at: Option<DateTime<Utc>>,
    pub oauth: Option<(OauthSettings, OauthSecrets)>,
    pub tls: Option<tls::Tls>,
}

fn purpose(what: &str, app: &AppId, ep: &EndpointId) -> String {
    format!("endpoint-{what}:{app}:{ep}")
}

/// Seals one of an endpoint's authentication secrets (`what`: `oauth`, `mtls`,
/// `token`), bound to the endpoint and to what it is.
pub fn seal(state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId, what: &str, clear: &[u8]) -> Vec<u8> {
    state.config.master_key.tenant_key(tenant).seal(&purpose(what, app, ep), clear)
}

/// Opens what [`seal`] sealed.
pub fn open(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    what: &str,
    sealed: &[u8],
) -> Result<Vec<u8>, String> {
    state.config.master_key.tenant_key(tenant).open(&purpose(what, app, ep), sealed).map_err(|e| e.to_string())
}

/// Opens a stored row for sending.
pub fn load(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    row: &endpoint_auth::AuthRow,
) -> Result<Loaded, String> {
    let (at, oauth_at) = (row.changed_at, row.oauth_at);
    let oauth = match (&row.oauth, &row.oauth_secrets) {
        (Some(settings), sealed) => {
            let settings: OauthSettings =
                serde_json::from_value(settings.clone()).map_err(|e| format!("stored OAuth settings: {e}"))?;
            let secrets = match sealed {
                Some(s) => serde_json::from_slice(&open(state, tenant, app, ep, "oauth", s)?)
                    .map_err(|e| format!("stored OAuth secrets: {e}"))?,
                None => OauthSecrets::default(),
            };
            Some((settings, secrets))
        }
        (None, _) => None,
    };
    let identity = match &row.mtls_identity {
        Some(s) => Some(open(state, tenant, app, ep, "mtls", s)?),
        None => None,
    };
    let tls = match (identity, &row.server_ca) {
        (None, None) => None,
        (identity, ca) => Some(tls::Tls::new(identity, ca.clone())?),
    };
    Ok(Loaded { at, oauth_at, oauth, tls })
}

/// Settings read, and the `changed_at` they were read at.
type HeldAt = (DateTime<Utc>, Arc<Loaded>);

/// Endpoints' settings kept per process, keyed by endpoint and `auth_at`.
#[derive(Default)]
pub struct Auths {
    held: Mutex<HashMap<tokens::EndpointKey, HeldAt>>,
    pub tokens: tokens::Tokens,
}

/// Endpoints kept; past it the map starts again (each is read once more). Each
/// holds at most two PEM texts of 64 KiB and the OAuth client's settings.
const MOST_HELD: usize = 1_000;

/// Why an endpoint's settings are not at hand.
#[derive(Debug)]
pub enum Unread {
    /// The database cannot say now: the delivery waits.
    Db(String),
    /// They are stored but cannot be used (a seal that does not open, a PEM a
    /// release before this one accepted): the attempt fails, saying so.
    Unusable(String),
}

impl Auths {
    /// The endpoint's settings as of `at` (its `auth_at`), read if not held.
    pub async fn of(
        &self,
        state: &AppState,
        tenant: &TenantId,
        app: &AppId,
        ep: &EndpointId,
        at: DateTime<Utc>,
    ) -> Result<Arc<Loaded>, Unread> {
        let key = (tenant.clone(), app.clone(), ep.clone());
        if let Some((held_at, l)) = self.held.lock().expect("never poisoned").get(&key) {
            if *held_at >= at {
                return Ok(l.clone());
            }
        }
        let row = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            endpoint_auth::get(&**conn, tenant, app, ep).await
        })
        .await
        .map_err(|e| Unread::Db(format!("reading the endpoint's authentication: {e}")))?;
        // Removed since the claim: nothing to authenticate with (kept under the claim's time).
        let (changed, loaded) = match row {
            Some(r) => (r.changed_at, load(state, tenant, app, ep, &r).map_err(Unread::Unusable)?),
            None => (at, Loaded { at, oauth_at: None, oauth: None, tls: None }),
        };
        let loaded = Arc::new(loaded);
        let mut held = self.held.lock().expect("never poisoned");
        if held.len() >= MOST_HELD {
            held.clear();
        }
        held.insert(key, (changed, loaded.clone()));
        Ok(loaded)
    }
}
