//! The retry schedule a failed attempt follows: its event type's own, if the
//! tenant set one (`…/event-type/{name}/retry-schedule`), else the operator's.
//!
//! Read only when an attempt fails, and kept per (tenant, type) for a short while:
//! the claim of every delivery stays as it was, and a type's change reaches each
//! worker within [`KEPT`].

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hookgate_shared::{db, ids::TenantId, store::type_schedules, AppState};

/// How long a schedule read is used before it is read again.
pub const KEPT: Duration = Duration::from_secs(30);
/// Entries kept at most; past it the cache starts again (types are few per tenant).
const MOST_ENTRIES: usize = 10_000;

type Schedule = Option<Arc<[Duration]>>;

#[derive(Default)]
pub struct TypeSchedules {
    entries: Mutex<HashMap<(TenantId, String), (Instant, Schedule)>>,
}

impl TypeSchedules {
    /// The event type's own schedule (`Ok(None)`: the default), read within
    /// `within`. `Err` when it cannot be known (Postgres slow or down, no time
    /// left) and no earlier read is kept: the caller must not judge by it.
    pub async fn of(
        &self,
        state: &AppState,
        tenant: &TenantId,
        event_type: &str,
        within: Duration,
    ) -> Result<Schedule, ()> {
        let key = (tenant.clone(), event_type.to_owned());
        let kept = self.entries.lock().expect("not poisoned").get(&key).cloned();
        if let Some((at, s)) = &kept {
            if at.elapsed() < KEPT {
                return Ok(s.clone());
            }
        }
        let read = db::bounded(state.db_budget().min(within), async {
            let conn = db::conn(&state.db).await?;
            type_schedules::get(&**conn, tenant, event_type).await
        })
        .await;
        let schedule: Schedule = match read {
            Ok(found) => found.flatten().map(|ms| ms.iter().map(|&m| Duration::from_millis(m.max(0) as u64)).collect()),
            // What was read before, however old, is better than a guess.
            Err(e) => {
                tracing::debug!(error = %e, "an event type's retry schedule could not be read");
                return kept.map(|(_, s)| s).ok_or(());
            }
        };
        let mut entries = self.entries.lock().expect("not poisoned");
        if entries.len() >= MOST_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), schedule.clone()));
        Ok(schedule)
    }
}
