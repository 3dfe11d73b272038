//! Keeping endpoint wakes honest from the worker's side: raising the wakes of
//! endpoints its claims found drained, a few times a second, in one step per
//! tenant; and a slow sweep that wakes endpoints with deliveries due but no wake
//! (made due by the previous release while it ran beside this one). Also the
//! statistics of partitions that just got their first rows (`analyze_loop`).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    ids::{AppId, EndpointId, TenantId},
    store::{partitions, queues, wakes, StoreError},
    AppState,
};
use tokio::sync::{mpsc, Notify};

use super::plan::Drained;

/// How often drained endpoints' wakes are raised: how long such an endpoint is
/// left out of listings at most (a retry of it that fell due meanwhile waits
/// this long).
pub(super) const RAISE_EVERY: Duration = Duration::from_millis(200);
/// How often the sweep looks, and how many endpoints each look covers.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
const SWEEP_STEP: i64 = 512;

/// Raises the wakes of drained endpoints, forever; tells the claim loop the
/// earliest wake it wrote (`woken`), and wakes it when one is due now.
pub(super) async fn raise_loop(
    state: AppState,
    drained: Drained,
    woken: mpsc::UnboundedSender<DateTime<Utc>>,
    wake: Arc<Notify>,
) {
    let mut tick = tokio::time::interval(RAISE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let taken: Vec<_> = drained.lock().expect("drained lock").iter().cloned().collect();
        if taken.is_empty() {
            continue;
        }
        let mut by_tenant: BTreeMap<TenantId, Vec<(AppId, EndpointId)>> = BTreeMap::new();
        for q in &taken {
            by_tenant.entry(q.tenant_id.clone()).or_default().push((q.app_id.clone(), q.endpoint_id.clone()));
        }
        let mut earliest: Option<DateTime<Utc>> = None;
        let mut failed = false;
        for (tenant, endpoints) in &by_tenant {
            match raise(&state, tenant, endpoints).await {
                Ok(raised) => {
                    for at in raised.into_iter().filter_map(|(_, at)| at) {
                        earliest = Some(earliest.map_or(at, |e| e.min(at)));
                    }
                }
                Err(e) => {
                    failed = true;
                    tracing::debug!(error = %e, "raising endpoint wakes postponed");
                }
            }
        }
        if failed {
            // Left out a while longer; listed again at the latest when raised.
            continue;
        }
        // Raised, or held by a statement making deliveries due (due soon anyway):
        // either way, listed again by their wakes from now on.
        let mut d = drained.lock().expect("drained lock");
        for q in &taken {
            d.remove(q);
        }
        drop(d);
        if let Some(at) = earliest {
            let _ = woken.send(at);
            if at <= Utc::now() {
                wake.notify_one();
            }
        }
    }
}

async fn raise(
    state: &AppState,
    tenant: &TenantId,
    endpoints: &[(AppId, EndpointId)],
) -> Result<Vec<((AppId, EndpointId), Option<DateTime<Utc>>)>, StoreError> {
    db::bounded(state.db_budget(), async {
        let mut conn = db::conn(&state.db).await?;
        wakes::raise(&mut conn, tenant, endpoints).await
    })
    .await
    .inspect_err(|e| db::forget_stale_plans(&state.db, e))
}

/// Every [`SWEEP_EVERY`], the next [`SWEEP_STEP`] endpoints with deliveries
/// waiting, in key order round the table: those with one due get their wake
/// brought to now (a no-op where it is due already).
pub(super) async fn sweep_loop(state: AppState, wake: Arc<Notify>) {
    let mut after: Option<queues::Queue> = None;
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let swept = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            let (due, last) = queues::list(&conn, after.as_ref(), SWEEP_STEP).await?;
            let mut by_tenant: BTreeMap<TenantId, Vec<(AppId, EndpointId)>> = BTreeMap::new();
            for q in due {
                by_tenant.entry(q.tenant_id).or_default().push((q.app_id, q.endpoint_id));
            }
            let mut woke = 0;
            for (tenant, endpoints) in &by_tenant {
                woke += wakes::wake_now(&conn, tenant, endpoints).await?;
            }
            Ok((woke, last))
        })
        .await;
        match swept {
            Ok((woke, last)) => {
                after = last;
                if woke > 0 {
                    wake.notify_one();
                }
            }
            Err(e) => tracing::debug!(error = %e, "sweeping for unwoken endpoints postponed"),
        }
    }
}

/// How often partitions without statistics are looked for.
const ANALYZE_EVERY: Duration = Duration::from_secs(2);

/// Every [`ANALYZE_EVERY`], analyzes the partitions that hold rows but have no
/// statistics (`store::partitions::analyze_fresh`): the claim's plans are made
/// again from them.
pub(super) async fn analyze_loop(state: AppState) {
    let mut tick = tokio::time::interval(ANALYZE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let done = db::bounded(state.db_budget() * 4, async {
            let conn = db::conn(&state.db).await?;
            partitions::analyze_fresh(&**conn, 4).await
        })
        .await;
        match done {
            Ok(names) if !names.is_empty() => tracing::debug!(?names, "analyzed partitions without statistics"),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "analyzing new partitions postponed"),
        }
    }
}
