//! Cron sources: every ingress process emits each cron source's payload at its
//! schedule's ticks, admitted as any event is, keyed by the tick's time; so of
//! the processes that emit one tick, one admits it, and a process that comes
//! back from a restart emits the latest tick it missed, once, and no older one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use hookgate_shared::{
    db,
    ids::SourceId,
    inbound_keys::{self, DedupeKey},
    ingest::Cron,
    limits,
    quota::Limit,
    store::{ingest_sources, sources::Source, StoreError},
    AppState,
};

use crate::{
    admit::{Admitted, Candidate},
    commit::GroupCommit,
    key::{self, KeyKind},
};

/// How often the list of cron sources is read again (a new source, a changed
/// schedule or a deleted one is seen within this).
const RELOAD: Duration = Duration::from_secs(5);
/// The oldest tick still emitted: after a longer gap, the latest tick is skipped
/// too. Under the shortest dedupe window (a day), so a tick's key is still kept
/// whenever a process could emit it again.
const CATCH_UP: chrono::TimeDelta = chrono::TimeDelta::hours(23);
/// Ticks emitted at once (their admissions share the group commit's batches).
const AT_ONCE: usize = 32;
/// The event type of what a cron source emits.
pub const EVENT_TYPE: &str = "cron";

/// The tick a source is due to emit at `now`: its schedule's latest tick before
/// `now`, unless it came before the source was made or last changed (a new
/// schedule's past ticks were never missed) or is more than [`CATCH_UP`] old.
pub fn due(cron: &Cron, since: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let tick = cron.latest_before(now)?;
    (tick >= since && now - tick <= CATCH_UP).then_some(tick)
}

/// Ticks for every cron source until the process stops.
pub async fn run(state: AppState, group: actix_web::web::Data<GroupCommit>) {
    let mut sources: Vec<(Source, Cron)> = Vec::new();
    let mut loaded: Option<Instant> = None;
    // The latest tick of each source this process has seen admitted (by it or another).
    let mut emitted: HashMap<SourceId, DateTime<Utc>> = HashMap::new();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if loaded.is_none_or(|at| at.elapsed() >= RELOAD) {
            match load(&state).await {
                Ok(found) => {
                    let live: std::collections::HashSet<&SourceId> = found.iter().map(|(s, _)| &s.id).collect();
                    emitted.retain(|id, _| live.contains(id));
                    sources = found;
                    loaded = Some(Instant::now());
                }
                Err(e) => tracing::warn!(error = %e, "cron sources could not be read; ticking with the last list"),
            }
        }
        let now = Utc::now();
        // Owned, so the futures can run together in this spawned task.
        let due_now: Vec<_> = sources
            .iter()
            .filter_map(|(s, c)| due(c, s.updated_at, now).map(|tick| (s.clone(), c.clone(), tick)))
            .filter(|(s, _, tick)| emitted.get(&s.id).is_none_or(|last| last < tick))
            .map(|(source, cron, tick)| {
                let (state, group) = (state.clone(), group.clone());
                async move { (source.id.clone(), tick, emit(&state, &group, &source, &cron, tick).await) }
            })
            .collect();
        // Emitted together, so the group commit batches them; a failure is said
        // once per pass, and the tick tried again next second.
        let results: Vec<(SourceId, DateTime<Utc>, Result<(), Emit>)> =
            futures_util::stream::iter(due_now).buffer_unordered(AT_ONCE).collect().await;
        let mut failed = 0;
        for (id, tick, result) in results {
            match result {
                Ok(()) => {
                    emitted.insert(id, tick);
                }
                // Over the tenant's inbound rate: tried again next second.
                Err(Emit::Refused) => {}
                Err(Emit::Failed(e)) => {
                    failed += 1;
                    if failed == 1 {
                        tracing::warn!(source = %id, error = %e, "cron ticks were not admitted; retrying");
                    }
                }
            }
        }
    }
}

/// Why a tick was not admitted this time.
enum Emit {
    /// Over the tenant's inbound rate.
    Refused,
    Failed(String),
}

/// The live cron sources with their parsed settings (a source whose stored
/// settings do not parse is skipped, said once per read).
async fn load(state: &AppState) -> Result<Vec<(Source, Cron)>, StoreError> {
    let found = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        ingest_sources::cron_sources(&**conn).await
    })
    .await?;
    Ok(found
        .into_iter()
        .filter_map(|s| {
            let config = s.ingest.as_ref().and_then(|i| i.config.as_object().cloned()).unwrap_or_default();
            match Cron::parse(&config) {
                Ok(cron) => Some((s, cron)),
                Err(e) => {
                    tracing::warn!(source = %s.id, error = %e, "a cron source's stored settings do not parse");
                    None
                }
            }
        })
        .collect())
}

/// Admits one tick: accepted, or a duplicate (another process admitted it
/// first). A tick counts against its tenant's inbound rate, as any event does.
async fn emit(
    state: &AppState,
    group: &GroupCommit,
    source: &Source,
    cron: &Cron,
    tick: DateTime<Utc>,
) -> Result<(), Emit> {
    let failed = |e: StoreError| Emit::Failed(e.to_string());
    let quotas = limits::quotas(state, &source.tenant_id).await.map_err(|e| Emit::Failed(e.to_string()))?;
    if limits::rate(state, &source.tenant_id, &quotas, Limit::InboundPerSecond).await.is_err() {
        return Err(Emit::Refused);
    }
    // The tick's instant in seconds: the same key in every process.
    let plain = key::derive(&source.tenant_id, &source.id, KeyKind::Provider, tick.timestamp().to_string().as_bytes());
    let DedupeKey { key, plain: plain_key } =
        inbound_keys::dedupe_key(state, &source.tenant_id, plain).await.map_err(failed)?;
    let candidate = Candidate {
        source,
        retention_days: source.retention(state.config.retention_inbound_days),
        key,
        plain_key,
        event_type: EVENT_TYPE.into(),
        content_type: cron.content_type.clone(),
        payload: cron.payload.clone().into_bytes(),
    };
    match group.admit(candidate).await {
        Ok(Admitted::Accepted(_) | Admitted::Duplicate(..)) => Ok(()),
        Ok(Admitted::SourceGone) => Err(Emit::Failed("the source was deleted".into())),
        Ok(_) => Err(Emit::Failed("in flight".into())),
        Err(e) => Err(Emit::Failed(e.detail)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn cron(schedule: &str) -> Cron {
        let config = serde_json::json!({ "schedule": schedule, "payload": "{}" });
        Cron::parse(config.as_object().unwrap()).unwrap()
    }

    #[test]
    fn the_tick_due_is_the_latest_before_now_never_one_before_the_last_change_or_a_day_old() {
        let at = |h, m, s| Utc.with_ymd_and_hms(2026, 12, 5, h, m, s).unwrap();
        let hourly = cron("0 * * * *");
        assert_eq!(due(&hourly, at(1, 0, 0), at(4, 30, 0)), Some(at(4, 0, 0)));
        // After a restart of three hours, only the latest missed tick is due: no burst.
        assert_eq!(due(&hourly, at(0, 0, 0), at(7, 0, 1)), Some(at(7, 0, 0)));
        // Made, or its schedule changed, after the tick: never missed, not emitted.
        assert_eq!(due(&hourly, at(4, 10, 0), at(4, 30, 0)), None);
        let yearly = cron("@yearly");
        assert_eq!(due(&yearly, at(0, 0, 0) - chrono::TimeDelta::days(400), at(4, 0, 0)), None, "a day old at most");
    }
}
