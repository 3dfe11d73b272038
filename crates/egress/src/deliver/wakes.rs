//! Keeping endpoint wakes honest from the worker's side: raising the wakes of
//! endpoints its claims found drained, a few times a second, in one step per
//! tenant; and a slow sweep that wakes endpoints with deliveries due but no wake
//! (made due by the previous release while it ran beside this one). Also the
//! statistics of tables that outgrew theirs (`analyze_loop`).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    ids::{AppId, EndpointId, TenantId},
    store::{
        partitions,
        queues::{self, Queue},
        wakes, StoreError,
    },
    AppState,
};
use tokio::sync::{mpsc, Notify};

use super::plan::Drained;

/// How often drained endpoints' wakes are raised: how long such an endpoint is
/// left out of listings at most (a retry of it that fell due meanwhile waits
/// this long).
pub(super) const RAISE_EVERY: Duration = Duration::from_millis(200);
/// How often the sweep looks, after its first round, and how many endpoints each
/// look covers.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
const SWEEP_STEP: i64 = 512;

/// Most endpoints one raise takes: one transaction each, so that no lock on a
/// wake row is held for long, and one tenant's trouble fails only its own.
const RAISE_CHUNK: usize = 64;
/// An endpoint whose wake could not be raised is listed again after this (its
/// wake is early, never late: it costs a look).
const GIVE_UP: Duration = Duration::from_secs(5);
/// The longest one pass of raising goes on.
const MOST_PASS: Duration = Duration::from_secs(1);

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
        let taken: Vec<(Queue, Instant)> =
            drained.lock().expect("drained lock").iter().map(|(q, at)| (q.clone(), *at)).collect();
        if taken.is_empty() {
            continue;
        }
        let mut by_tenant: BTreeMap<TenantId, Vec<(AppId, EndpointId)>> = BTreeMap::new();
        for (q, _) in &taken {
            by_tenant.entry(q.tenant_id.clone()).or_default().push((q.app_id.clone(), q.endpoint_id.clone()));
        }
        let mut earliest: Option<DateTime<Utc>> = None;
        let mut done: Vec<Queue> = Vec::new();
        let pass = Instant::now();
        'pass: for (tenant, endpoints) in &by_tenant {
            for chunk in endpoints.chunks(RAISE_CHUNK) {
                // A pass takes a second at most; the rest waits for the next.
                if pass.elapsed() >= MOST_PASS {
                    break 'pass;
                }
                match raise(&state, tenant, chunk).await {
                    Ok(raised) => {
                        for at in raised.into_iter().filter_map(|(_, at)| at) {
                            earliest = Some(earliest.map_or(at, |e| e.min(at)));
                        }
                        // Raised, or held by a statement making deliveries due (due
                        // soon anyway): listed by their wakes from now on.
                        done.extend(chunk.iter().map(|(a, e)| Queue {
                            tenant_id: tenant.clone(),
                            app_id: a.clone(),
                            endpoint_id: e.clone(),
                        }));
                    }
                    Err(e) => tracing::debug!(error = %e, "raising endpoint wakes postponed"),
                }
            }
        }
        let mut d = drained.lock().expect("drained lock");
        for q in &done {
            d.remove(q);
        }
        d.retain(|_, at| at.elapsed() < GIVE_UP);
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
/// brought to now (a no-op where it is due already). A first round at start goes
/// through the whole table a step every [`FIRST_ROUND`] (after a random pause, so
/// that workers started together do not sweep together). Since migration 0027 (a
/// switch) no release that makes deliveries due without a wake runs beside this
/// one: the sweep is a safety net, not a path work takes.
pub(super) async fn sweep_loop(state: AppState, wake: Arc<Notify>) {
    tokio::time::sleep(Duration::from_millis(rand::random_range(0..2_000))).await;
    let mut after: Option<Queue> = None;
    let mut fast = true;
    let mut last_step = Instant::now() - SWEEP_EVERY;
    let mut tick = tokio::time::interval(FIRST_ROUND);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !fast && last_step.elapsed() < SWEEP_EVERY {
            continue;
        }
        last_step = Instant::now();
        let swept = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            let (due, last) = queues::list(&conn, after.as_ref(), SWEEP_STEP).await?;
            Ok((wake_queues(&conn, due).await?, last))
        })
        .await;
        match swept {
            Ok((woke, last)) => {
                // The end of the table: a fast round is over; round again from the start.
                if last.is_none() {
                    fast = false;
                }
                after = last;
                if woke > 0 {
                    wake.notify_one();
                }
            }
            Err(e) => tracing::debug!(error = %e, "sweeping for unwoken endpoints postponed"),
        }
    }
}

/// How often the first round of the sweep steps.
const FIRST_ROUND: Duration = Duration::from_millis(200);

/// Brings the wakes of `due` endpoints to now, one statement per tenant.
async fn wake_queues(conn: &db::Client, due: Vec<Queue>) -> Result<u64, StoreError> {
    let mut by_tenant: BTreeMap<TenantId, Vec<(AppId, EndpointId)>> = BTreeMap::new();
    for q in due {
        by_tenant.entry(q.tenant_id).or_default().push((q.app_id, q.endpoint_id));
    }
    let mut woke = 0;
    for (tenant, endpoints) in &by_tenant {
        woke += wakes::wake_now(conn, tenant, endpoints).await?;
    }
    Ok(woke)
}

/// How often tables whose statistics fell behind are looked for.
const ANALYZE_EVERY: Duration = Duration::from_millis(500);
/// How long after a failed analysis the next is tried.
const ANALYZE_BACKOFF: Duration = Duration::from_secs(30);

/// Every [`ANALYZE_EVERY`], analyzes the partitions without statistics and the
/// tables that doubled since their last analysis (`store::partitions::analyze_stale`):
/// the plans of the statements on them are made again from the new statistics.
pub(super) async fn analyze_loop(state: AppState) {
    let mut tick = tokio::time::interval(ANALYZE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let done = db::bounded(state.db_budget() * 4, async {
            let mut conn = db::conn(&state.db).await?;
            partitions::analyze_stale(&mut conn, 4).await
        })
        .await;
        match done {
            Ok(names) if !names.is_empty() => tracing::debug!(?names, "analyzed tables whose statistics fell behind"),
            Ok(_) => {}
            Err(e) => {
                // A table that cannot be analyzed now (a lock, a slow sample) is not
                // tried again twice a second.
                tracing::debug!(error = %e, "analyzing tables postponed");
                tokio::time::sleep(ANALYZE_BACKOFF).await;
            }
        }
    }
}
