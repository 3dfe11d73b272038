//! A delivery through its endpoint's transformation: the code loaded once per
//! change (the claim says when it last changed), run under the engine's limits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::Value;

use hookgate_shared::ids::{AppId, EndpointId, TenantId};
use hookgate_shared::store::{deliveries::Claimed, transformations};
use hookgate_shared::{db, AppState};

use crate::sandbox::{Sandbox, Scope};
use crate::secrets;
use crate::transform::{Outcome, TransformError, Webhook};

/// What the transformation made of a delivery.
pub(super) enum Applied {
    Send(Webhook),
    Cancel,
    /// The code failed: an attempt that failed, with the reason in the log.
    Failed(TransformError),
    /// The code could not be read or run now (Postgres, the sealed variables,
    /// every sandbox busy): not an attempt; the delivery waits a moment.
    Unreadable(String),
}

/// Endpoints' code as last loaded, by endpoint.
type Key = (TenantId, AppId, EndpointId);

struct Loaded {
    at: DateTime<Utc>,
    code: Arc<str>,
    variables: Arc<Value>,
}

/// A worker's transformations: its cache of code; runs go to the process's sandboxes.
pub(super) struct Transforms {
    max_body: usize,
    cache: Mutex<HashMap<Key, Arc<Loaded>>>,
}

/// Endpoints whose code is kept; past it the cache starts again.
const MOST_CACHED: usize = 10_000;

impl Transforms {
    pub(super) fn new(max_body: usize) -> Self {
        Transforms { max_body, cache: Mutex::new(HashMap::new()) }
    }

    /// Runs the endpoint's transformation (changed last at `at`) on `hook`. The
    /// code is loaded again whenever `at` differs from the cached one's (not only
    /// when it is later: a database's clock can step back).
    pub(super) async fn apply(&self, state: &AppState, c: &Claimed, at: DateTime<Utc>, hook: Webhook) -> Applied {
        let key = (c.tenant_id.clone(), c.app_id.clone(), c.endpoint_id.clone());
        let cached = self.cache.lock().expect("transformations cache").get(&key).filter(|l| l.at == at).cloned();
        let loaded = match cached {
            Some(l) => l,
            None => match load(state, &key).await {
                Ok(Some(l)) => {
                    let l = Arc::new(l);
                    let mut cache = self.cache.lock().expect("transformations cache");
                    if cache.len() >= MOST_CACHED {
                        cache.clear();
                    }
                    cache.insert(key, l.clone());
                    l
                }
                // Disabled or removed since the claim read it: sent as it is.
                Ok(None) => return Applied::Send(hook),
                Err(e) => return Applied::Unreadable(e),
            },
        };
        let scope = Scope { tenant: &c.tenant_id, app: &c.app_id, endpoint: &c.endpoint_id, redacted: false };
        match Sandbox::for_worker()
            .run(&scope, loaded.code.clone(), loaded.variables.clone(), hook, self.max_body)
            .await
        {
            Ok(Outcome::Send(h)) => Applied::Send(h),
            Ok(Outcome::Cancel) => Applied::Cancel,
            // Not the code's doing: no attempt, the delivery waits a moment.
            Err(e) if !e.is_the_codes() => Applied::Unreadable(e.to_string()),
            Err(e) => Applied::Failed(e),
        }
    }
}

/// The endpoint's transformation if it is in force, its variables opened.
async fn load(state: &AppState, (tenant, app, endpoint): &Key) -> Result<Option<Loaded>, String> {
    let stored = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        transformations::get(&**conn, tenant, app, endpoint).await
    })
    .await
    .map_err(|e| e.to_string())?;
    let Some(t) = stored.filter(|t| t.enabled && !t.code.trim().is_empty()) else { return Ok(None) };
    let variables = secrets::open_variables(state, tenant, app, endpoint, t.variables.as_deref())?;
    Ok(Some(Loaded { at: t.updated_at, code: t.code.into(), variables: Arc::new(variables) }))
}
