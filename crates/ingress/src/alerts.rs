//! Ingress's operational notices (and, in `log`, the log of refused requests): a burst of invalid signatures on a source
//! (`source.signature_failures`) and a source refused by its tenant's quota
//! (`source.quota_exceeded`), each at most once per source per window, counted
//! across instances in Redis (per instance while Redis is away).

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use hookgate_shared::{
    db,
    quota::Exceeded,
    redis::Script,
    store::{operational, operational::Notice, sources::Source},
    AppState,
};
use serde_json::json;

/// The window of both notices.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Invalid signatures on one source within [`WINDOW`] that make a burst.
pub const SIGNATURE_BURST: u64 = 10;

/// While Redis is away: (source, what) → (window start, count).
type LocalCounts = HashMap<(String, &'static str), (Instant, u64)>;

/// Counts one in a window that starts with its first count (any Redis version).
const COUNT: &str = r"
local n = redis.call('INCR', KEYS[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
";

pub struct Alerts {
    script: Script,
    local: Mutex<LocalCounts>,
    /// The log of refused requests a source's owner reads (Svix's ingest log).
    pub log: crate::refusals::RefusalLog,
}

impl Default for Alerts {
    fn default() -> Self {
        Alerts { script: Script::new(COUNT), local: Mutex::new(HashMap::new()), log: Default::default() }
    }
}

impl Alerts {
    /// Counts one in the source's window of `what`; the count so far in it.
    async fn count(&self, state: &AppState, source: &Source, what: &'static str) -> u64 {
        let key = state.redis.tenant_key(source.tenant_id.as_str(), &format!("alert:{what}:{}", source.id));
        let secs = WINDOW.as_secs();
        let script = &self.script;
        let counted: Option<u64> =
            state.redis.call(|mut c| async move { script.key(key).arg(secs).invoke_async(&mut c).await }).await;
        if let Some(n) = counted {
            return n;
        }
        let mut local = self.local.lock().expect("alert map is never poisoned");
        if local.len() > 10_000 {
            local.retain(|_, (at, _)| at.elapsed() < WINDOW);
        }
        let entry = local.entry((source.id.to_string(), what)).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
        entry.1
    }

    /// An invalid signature on `source`: the [`SIGNATURE_BURST`]th in a window notifies.
    pub async fn signature_failed(&self, state: &AppState, source: &Source) {
        if self.count(state, source, "signature").await == SIGNATURE_BURST {
            let data = json!({
                "sourceId": source.id.as_str(),
                "sourceName": source.name,
                "failures": SIGNATURE_BURST,
                "windowSeconds": WINDOW.as_secs(),
            });
            notify(state, Notice::with_data(&source.tenant_id, "source.signature_failures", &source.app_id, data));
        }
    }

    /// A request of `source` refused by a quota: the first in a window notifies.
    pub async fn quota_exceeded(&self, state: &AppState, source: &Source, e: &Exceeded) {
        if self.count(state, source, "quota").await == 1 {
            let data = json!({
                "sourceId": source.id.as_str(),
                "sourceName": source.name,
                "limit": e.limit.name(),
                "value": e.value,
            });
            notify(state, Notice::with_data(&source.tenant_id, "source.quota_exceeded", &source.app_id, data));
        }
    }
}

/// Writes the notice in the background: the provider's answer does not wait on it.
fn notify(state: &AppState, notice: Notice) {
    let state = state.clone();
    tokio::spawn(async move {
        let made = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            operational::emit(&**conn, std::slice::from_ref(&notice)).await
        })
        .await;
        match made {
            Ok(n) if n > 0 => state.wake.poke(),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, event = notice.event_type, "an operational notice was not written"),
        }
    });
}
