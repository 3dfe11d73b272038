//! Recording finished deliveries: in batches, with no batch poisoned by one row,
//! and no result lost or misjudged because Postgres was slow.
//!
//! A batch gathers what finishes within a few milliseconds and is one
//! transaction. A batch that waits more than a second for a lock is set apart
//! (the recorder goes on with the next) and written one tenant's part at a time;
//! a part refused again, a refusal, or a timeout that persists splits it: each
//! result is then written alone, so the healthy ones land whatever the others
//! wait on.
//! Waiting is never a verdict: a result that meets an outage, a stall or a lock
//! (`Unavailable`, `TimedOut`, `Locked`) is written again, with backoff, until Postgres
//! answers, however long that takes; only a result Postgres refuses
//! [`RECORD_TRIES`] times is quarantined. Results wait in memory, each holding
//! its worker slot, so the worker claims nothing more meanwhile: the memory is
//! bounded by its concurrency. If the process dies first, the leases bring the
//! deliveries back.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use futures_util::{stream, StreamExt};
use hookgate_shared::{
    db,
    ids::TenantId,
    status::DeliveryStatus,
    store::{
        deliveries::{self, Outcome, Recorded},
        results, StoreError,
    },
    AppState,
};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::{DeliveryConfig, Done};
use crate::metrics::EgressMetrics;

/// How often a result refused alone is written before it is quarantined.
const RECORD_TRIES: u32 = 3;
/// The first wait before writing again; it doubles up to [`MOST_WAIT`].
const RECORD_RETRY: Duration = Duration::from_millis(500);
const MOST_WAIT: Duration = Duration::from_secs(5);
/// How often a whole batch meets a timeout before it is split.
const BATCH_TIMEOUTS: u32 = 2;
/// The longest a batch waits for a lock before it is set apart (and a tenant's
/// part of it before that part is split): the recorder takes the next batch only
/// once the first try is settled, so a row locked elsewhere (an API call,
/// another recorder) holds up every tenant's results this long, not a statement
/// timeout or two.
const BATCH_LOCK_WAIT: Duration = Duration::from_secs(1);
/// Results of a split batch written at once.
const SPLIT_CONCURRENCY: usize = 8;
/// Most results one batch takes.
const MOST_PER_BATCH: usize = 1000;
/// How long the first result of a batch waits for others to share its
/// transaction. Recording is off the delivery's path: only the slot waits.
const GATHER: Duration = Duration::from_millis(10);

pub(super) async fn record_loop(
    state: AppState,
    metrics: EgressMetrics,
    cfg: DeliveryConfig,
    mut rx: mpsc::UnboundedReceiver<Done>,
    woken: mpsc::UnboundedSender<DateTime<Utc>>,
    permits: Arc<Semaphore>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + GATHER;
        while batch.len() < MOST_PER_BATCH {
            if let Ok(d) = rx.try_recv() {
                batch.push(d);
                continue;
            }
            // Waiting holds the batch's slots: only while the worker has half of
            // its slots free, so a backlog is never held up by the gathering.
            if permits.available_permits() < cfg.concurrency / 2 {
                break;
            }
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(d)) => batch.push(d),
                _ => break,
            }
        }
        let outcomes: Vec<Outcome> = batch.iter().map(|d| d.outcome.clone()).collect();
        let ctx = Ctx { state: state.clone(), metrics: metrics.clone(), cfg: cfg.clone(), woken: woken.clone() };
        match record_batch(&ctx, &outcomes, Some(BATCH_LOCK_WAIT)).await {
            Ok(()) => {}
            // A lock held on one of its rows (or on a whole table): the batch is set
            // apart, each tenant's part written in a transaction of its own, and a
            // part still refused split into single results; the recorder goes on
            // with the next batch meanwhile.
            Err(e) if e.is_locked() => {
                tracing::info!(error = %e, n = outcomes.len(), "a batch of delivery results waits for a lock; by tenant, apart");
                tokio::spawn(by_tenant(ctx, batch));
            }
            Err(e) => {
                tracing::warn!(error = %e, n = outcomes.len(), "a batch of delivery results failed; recording one by one");
                // Each result keeps its slot until it is settled.
                tokio::spawn(split(ctx, batch));
            }
        }
    }
}

/// A batch refused a lock, written again one tenant's part at a time (a few at
/// once), each in a transaction of its own with the batch's lock wait: only the
/// part that holds the locked row waits on it, and only that part is split.
async fn by_tenant(ctx: Ctx, batch: Vec<Done>) {
    let mut parts: BTreeMap<TenantId, Vec<Done>> = BTreeMap::new();
    for d in batch {
        parts.entry(d.outcome.tenant_id.clone()).or_default().push(d);
    }
    let ctx = Arc::new(ctx);
    stream::iter(parts.into_values())
        .for_each_concurrent(SPLIT_CONCURRENCY, |part| {
            let ctx = ctx.clone();
            async move {
                let outcomes: Vec<Outcome> = part.iter().map(|d| d.outcome.clone()).collect();
                let written = {
                    let _writer = WRITERS_APART.acquire().await.expect("the semaphore is never closed");
                    record_batch(&ctx, &outcomes, Some(BATCH_LOCK_WAIT)).await
                };
                if let Err(e) = written {
                    tracing::warn!(error = %e, n = outcomes.len(), "a tenant's delivery results failed; recording one by one");
                    split((*ctx).clone(), part).await;
                }
            }
        })
        .await;
}

/// Writes made apart from the recorder's loop (a batch set apart, the results of
/// a split one) under way at once per process: with Postgres slow or rows
/// contended, they must not take every pooled connection from the claim.
static WRITERS_APART: Semaphore = Semaphore::const_new(4);

/// What writing a result needs.
#[derive(Clone)]
struct Ctx {
    state: AppState,
    metrics: EgressMetrics,
    cfg: DeliveryConfig,
    woken: mpsc::UnboundedSender<DateTime<Utc>>,
}

async fn write(ctx: &Ctx, outcomes: &[Outcome], lock_wait: Option<Duration>) -> Result<Recorded, StoreError> {
    // Timed out after the commit went through, the retry writes the same again:
    // recording is idempotent (attempt ids, and fencing tokens the first write cleared).
    db::bounded(ctx.state.db_budget(), async {
        let mut conn = db::conn(&ctx.state.db).await?;
        results::record(&mut conn, outcomes, ctx.cfg.disable_after, lock_wait).await
    })
    .await
    .inspect_err(|e| db::forget_stale_plans(&ctx.state.db, e))
}

fn count(ctx: &Ctx, outcomes: &[Outcome], recorded: Recorded) {
    ctx.metrics.endpoints_disabled.inc_by(recorded.disabled);
    if recorded.operational > 0 {
        ctx.state.wake.poke();
    }
    if recorded.stale > 0 {
        // Fencing at work: a claim outlived its lease and another worker owns the
        // delivery now; its attempt is kept, its verdict is the new owner's to give.
        tracing::info!(stale = recorded.stale, "results of expired claims were not applied to their deliveries");
    }
    let failed = outcomes.iter().filter(|o| o.status == DeliveryStatus::Failed).count();
    ctx.metrics.failed.inc_by(failed as u64);
    // This worker's claim loop learns of the retries it wrote at once.
    if let Some(at) = outcomes.iter().filter_map(|o| o.next_attempt_at).min() {
        let _ = ctx.woken.send(at);
    }
}

/// The next wait after `wait`.
fn longer(wait: Duration) -> Duration {
    (wait * 2).min(MOST_WAIT)
}

/// Writes `outcomes` in one transaction, waiting out an outage; a refusal, a lock
/// not granted within `lock_wait` (or the session's lock timeout), or a timeout
/// met [`BATCH_TIMEOUTS`] times, is returned. The recorder waits for its first
/// try before it takes the next batch, so a lock holds up every tenant's results
/// for at most [`BATCH_LOCK_WAIT`].
async fn record_batch(ctx: &Ctx, outcomes: &[Outcome], lock_wait: Option<Duration>) -> Result<(), StoreError> {
    // Never longer than the session's own lock timeout (the statement timeout).
    let lock_wait = lock_wait.map(|w| w.min(ctx.state.config.db_statement_timeout));
    let mut wait = RECORD_RETRY;
    let mut timeouts = 0;
    loop {
        match write(ctx, outcomes, lock_wait).await {
            Ok(recorded) => {
                count(ctx, outcomes, recorded);
                return Ok(());
            }
            // A lock held on one of its rows: that row's to wait out, not the batch's.
            Err(e) if e.is_locked() => return Err(e),
            Err(e) if e.is_timeout() && timeouts + 1 >= BATCH_TIMEOUTS => return Err(e),
            Err(e) if e.is_unavailable() => {
                timeouts += u32::from(e.is_timeout());
                tracing::warn!(error = %e, n = outcomes.len(), "recording delivery results waits for Postgres");
                tokio::time::sleep(wait).await;
                wait = longer(wait);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Results written again after their claims' leases ran out, without the slot
/// they held, at most, per process. Past it, such results keep their slots (the
/// worker claims less): memory stays bounded, and no result is ever dropped.
const MOST_ORPHANS: usize = 10_000;
static ORPHANS: AtomicUsize = AtomicUsize::new(0);

/// One result of a split batch, with the slot it holds until it is settled or
/// its claim's lease has run out (another worker may take the delivery then; its
/// attempt is still written, its verdict is fenced off).
struct Waiting {
    outcome: Outcome,
    slot: Option<OwnedSemaphorePermit>,
    claimed: Instant,
    /// Whether it counts in [`ORPHANS`] (it gave its slot back).
    orphan: bool,
    refused: u32,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.orphan {
            ORPHANS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Each result alone, all of them once before any is tried again, so the healthy
/// ones land at once whatever the others wait on. A result that meets only
/// outages, stalls and locks is written again until it lands; one refused
/// [`RECORD_TRIES`] times is quarantined (in a task of its own: it waits out
/// outages too).
async fn split(ctx: Ctx, batch: Vec<Done>) {
    let mut pending: Vec<Waiting> = batch
        .into_iter()
        .map(|d| Waiting { outcome: d.outcome, slot: Some(d.permit), claimed: d.claimed, orphan: false, refused: 0 })
        .collect();
    let mut wait = RECORD_RETRY;
    let started = Instant::now();
    let ctx = Arc::new(ctx);
    loop {
        let results: Vec<(Waiting, Result<(), StoreError>)> = stream::iter(pending)
            .map(|w| {
                let ctx = &ctx;
                async move {
                    let written = {
                        let _writer = WRITERS_APART.acquire().await.expect("the semaphore is never closed");
                        write(ctx, std::slice::from_ref(&w.outcome), None).await
                    };
                    let written = match written {
                        Ok(recorded) => {
                            count(ctx, std::slice::from_ref(&w.outcome), recorded);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    };
                    (w, written)
                }
            })
            .buffer_unordered(SPLIT_CONCURRENCY)
            .collect()
            .await;
        pending = Vec::new();
        for (mut w, written) in results {
            match written {
                Ok(()) => {}
                // Postgres is away, stalled, or a lock holds the row: not a verdict.
                Err(e) if e.is_unavailable() => pending.push(w),
                Err(e) if w.refused + 1 >= RECORD_TRIES => {
                    let ctx = ctx.clone();
                    tokio::spawn(async move { quarantine(&ctx, &w.outcome, &e).await });
                }
                Err(_) => {
                    w.refused += 1;
                    pending.push(w);
                }
            }
        }
        // Past its lease, a result gives its slot back (while there is room for it).
        for w in pending.iter_mut().filter(|w| w.slot.is_some() && w.claimed.elapsed() >= ctx.cfg.lease) {
            if ORPHANS.fetch_add(1, Ordering::Relaxed) >= MOST_ORPHANS {
                ORPHANS.fetch_sub(1, Ordering::Relaxed);
                break;
            }
            w.slot = None;
            w.orphan = true;
        }
        if pending.is_empty() {
            return;
        }
        tracing::warn!(
            n = pending.len(),
            waited_s = started.elapsed().as_secs(),
            "delivery results wait to be recorded; writing them again"
        );
        tokio::time::sleep(wait).await;
        wait = longer(wait);
    }
}

/// The last resort for a result refused [`RECORD_TRIES`] times: its delivery is
/// marked failed (if this claim still holds it), counted, and logged here. Marking
/// waits out outages as recording does.
async fn quarantine(ctx: &Ctx, o: &Outcome, e: &StoreError) {
    let mut wait = RECORD_RETRY;
    let marked = loop {
        let marked = db::bounded(ctx.state.db_budget(), async {
            let conn = db::conn(&ctx.state.db).await?;
            deliveries::quarantine(&**conn, o).await
        })
        .await;
        match marked {
            Err(e) if e.is_unavailable() => {
                tokio::time::sleep(wait).await;
                wait = longer(wait);
            }
            other => break other,
        }
    };
    ctx.metrics.records_quarantined.inc();
    tracing::error!(
        tenant = %o.tenant_id, app = %o.app_id, msg = %o.msg_id, endpoint = %o.endpoint_id,
        error = %e, marked_failed = ?marked,
        "a delivery result cannot be recorded; quarantined (marked failed, resendable)"
    );
}
