//! The form inbound dedupe keys are stored in: keyed per tenant (see
//! [`crate::crypto::InboundKeyer`]), and for the longest dedupe window after the
//! upgrade that switched to it, also the plain form keys were stored in before.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use tokio::sync::OnceCell;

use crate::{crypto::InboundKeyer, db, ids::TenantId, store::StoreError, AppState};

/// How long after the switch plain keys are looked for: the longest dedupe window
/// a source can have (90 days; a plain key stored before the switch is pruned
/// within it) and a day's margin, since the switch's time is Postgres's clock and
/// the comparison this process's.
pub const PLAIN_LOOKUP_DAYS: i64 = 91;

/// One event's key as admission uses it: `key` is what a new admission stores;
/// `plain` is the form an admission before the switch stored the same event
/// under, while such keys may still be stored (`None` after, and on a new
/// installation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeKey {
    pub key: String,
    pub plain: Option<String>,
}

/// The process's view of the stored key form: the keyer, and when keys began to
/// be stored keyed (read once: the switch that sets it runs with every process stopped).
#[derive(Clone)]
pub struct InboundKeys {
    keyer: InboundKeyer,
    keyed_at: Arc<OnceCell<Option<DateTime<Utc>>>>,
}

impl InboundKeys {
    pub fn new(keyer: InboundKeyer) -> Self {
        InboundKeys { keyer, keyed_at: Arc::default() }
    }

    /// The keyed form of a plain digest.
    pub fn keyed(&self, tenant: &TenantId, plain: &str) -> String {
        self.keyer.keyed(tenant, plain)
    }

    /// Whether plain keys may still be stored at `now`, given when keying began
    /// (`None`: keys were never stored plain).
    fn plain_may_remain(keyed_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        keyed_at.is_some_and(|at| now < at + Duration::days(PLAIN_LOOKUP_DAYS))
    }
}

/// When keys began to be stored keyed, read once per process (bounded).
async fn keyed_at(state: &AppState) -> Result<Option<DateTime<Utc>>, StoreError> {
    let cell = &state.inbound_keys.keyed_at;
    cell.get_or_try_init(|| {
        db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            crate::store::inbound_events::keyed_at(&**conn).await
        })
    })
    .await
    .copied()
}

/// The plain digest, while keys stored before the switch may be in that form
/// (`None` after, and on an installation that never stored one).
pub async fn plain_form(state: &AppState, plain: String) -> Result<Option<String>, StoreError> {
    Ok(InboundKeys::plain_may_remain(keyed_at(state).await?, Utc::now()).then_some(plain))
}

/// The key an event with this plain digest is admitted under, with its plain
/// form while keys from before the switch may remain.
pub async fn dedupe_key(state: &AppState, tenant: &TenantId, plain: String) -> Result<DedupeKey, StoreError> {
    let key = state.inbound_keys.keyed(tenant, &plain);
    Ok(DedupeKey { key, plain: plain_form(state, plain).await? })
}

/// The keyed forms of stored keys that may be plain (the same key where it may
/// not), to read what Redis counted under the keyed form for events admitted
/// before the switch.
pub async fn keyed_forms(state: &AppState, tenant: &TenantId, stored: &[String]) -> Result<Vec<String>, StoreError> {
    if !InboundKeys::plain_may_remain(keyed_at(state).await?, Utc::now()) {
        return Ok(stored.to_vec());
    }
    Ok(stored.iter().map(|k| state.inbound_keys.keyed(tenant, k)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_looked_for_only_within_the_longest_window_after_the_switch() {
        let at = Utc::now() - Duration::days(10);
        assert!(InboundKeys::plain_may_remain(Some(at), Utc::now()));
        assert!(!InboundKeys::plain_may_remain(Some(at), at + Duration::days(PLAIN_LOOKUP_DAYS)));
        // A new installation never stored a plain key.
        assert!(!InboundKeys::plain_may_remain(None, Utc::now()));
    }
}
