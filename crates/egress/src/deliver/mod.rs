//! The delivery worker: claims due deliveries in batches, fairly between tenants
//! and endpoints (`shares.rs`), sends each with bounded concurrency, and writes
//! the results back in batches.
//!
//! What to claim comes from two places (`plan.rs`): hints, the deliveries a
//! commit just made due, claimed by key without looking for them; and the
//! endpoints whose wake has come (`store::wakes`), for retries, backlogs, lost
//! hints and leases run out. Drained endpoints' wakes are raised (`wakes.rs`).
//!
//! No Postgres connection is held while a request is in flight: a connection is
//! taken to claim, returned, and taken again by the recorder. A delivery whose
//! worker dies mid-send becomes due again when its lease runs out.

mod attempt;
pub(crate) mod authorized;
mod destined;
pub mod exchange;
pub mod forward;
mod plan;
mod prepare;
mod pressure;
mod record;
mod refuse_own;
pub mod schedule;
pub mod send;
pub mod senders;
mod shares;
mod throttle;
mod transformed;
mod type_schedule;
mod wakes;

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    store::{
        deliveries::{self, Claimed, Outcome},
        queues,
    },
    trace::{self, KeyValue},
    AppState,
};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::metrics::EgressMetrics;
use senders::Senders;

/// The worker's settings, read from the process configuration.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub retry_schedule: Vec<Duration>,
    pub lease: Duration,
    pub concurrency: usize,
    pub batch: usize,
    pub poll: Duration,
    pub disable_after: Duration,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

impl DeliveryConfig {
    pub fn from_config(c: &hookgate_shared::Config) -> Self {
        DeliveryConfig {
            retry_schedule: c.retry_schedule.clone(),
            lease: c.delivery_lease,
            concurrency: c.worker_concurrency,
            batch: c.worker_concurrency.min(queues::MOST_PER_CLAIM),
            poll: c.worker_poll,
            disable_after: c.disable_after,
            connect_timeout: c.egress_connect_timeout,
            timeout: c.egress_timeout,
        }
    }
}

/// One process's delivery worker.
pub struct Worker {
    state: AppState,
    metrics: EgressMetrics,
    cfg: DeliveryConfig,
    senders: Senders,
    throttle: Arc<throttle::Throttle>,
    shares: shares::Shares,
    /// Since when hinted work that could start has waited (admission control).
    pressure: Arc<pressure::Pressure>,
    transforms: transformed::Transforms,
    /// Connections kept to destinations other than HTTP.
    destinations: crate::destinations::Publishers,
    /// Event types' own retry schedules, read when an attempt fails.
    schedules: type_schedule::TypeSchedules,
    /// Endpoints' OAuth clients, certificates and CAs, and their tokens.
    auths: crate::auth::Auths,
}

/// A finished delivery and the concurrency permit it holds until it is recorded.
struct Done {
    outcome: Outcome,
    permit: OwnedSemaphorePermit,
    /// When the delivery's claim began: its lease runs from then (unless renewed).
    claimed: Instant,
}

/// How long a worker woken from idle waits for the rest of a burst.
const GATHER: Duration = Duration::from_millis(2);
/// Claims that found nothing while hinted work could start, made one after the
/// other before the worker sleeps anyway (each drops what it found empty).
const MOST_SPINS: u32 = 64;

/// What one claim took, and when it listed, if it did.
struct Claim {
    claimed: Vec<Claimed>,
    listed_at: Option<Instant>,
}

impl Worker {
    pub fn new(state: AppState, metrics: EgressMetrics) -> Self {
        // The claim and the recorder run the same statements over and over:
        // planned once per connection (`db::Plans::Generic`).
        let state = state.with_generic_plans();
        let cfg = DeliveryConfig::from_config(&state.config);
        let senders = Senders::new(&state.config, state.own_services.clone());
        let throttle = Arc::new(throttle::Throttle::new(state.redis.clone()));
        let shares = shares::Shares::new(cfg.concurrency);
        let transforms = transformed::Transforms::new(state.config.max_body);
        Worker {
            state,
            metrics,
            cfg,
            senders,
            throttle,
            shares,
            pressure: Default::default(),
            transforms,
            destinations: Default::default(),
            schedules: Default::default(),
            auths: Default::default(),
        }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        let (woken_tx, mut woken_rx) = mpsc::unbounded_channel::<DateTime<Utc>>();
        let local = self.state.wake.local();
        let hints = self.state.wake.hints();
        let permits = Arc::new(Semaphore::new(self.cfg.concurrency));
        let drained: plan::Drained = Default::default();
        let this = Arc::new(self);
        // Helpers live exactly as long as this future: dropping it stops them.
        let _helpers = AbortOnDrop(vec![
            tokio::spawn(hookgate_shared::store::notify::listen(
                this.state.config.database_url.clone(),
                this.state.config.db_timeout,
                this.state.wake.clone(),
            )),
            tokio::spawn(sample_pending(this.state.clone(), this.metrics.clone())),
            tokio::spawn(record::record_loop(
                this.state.clone(),
                this.metrics.clone(),
                this.cfg.clone(),
                done_rx,
                woken_tx.clone(),
                permits.clone(),
            )),
            tokio::spawn(wakes::raise_loop(this.state.clone(), drained.clone(), woken_tx, local.clone())),
            tokio::spawn(wakes::sweep_loop(this.state.clone(), local.clone())),
            tokio::spawn(wakes::analyze_loop(this.state.clone())),
            tokio::spawn(pressure::report_loop(this.state.clone(), this.pressure.clone())),
        ]);
        let mut plan = plan::Plan::new();
        let mut last_list = Instant::now();
        let mut spins = 0;
        loop {
            // Wait for room, then take the free slots and claim only as many as
            // were taken: a claimed delivery never waits for a slot while its lease runs.
            let mut first = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
            if let Some(more) = shares::reserve(&permits, this.cfg.batch - 1) {
                first.merge(more);
            }
            let room = first.num_permits();
            while let Ok(at) = woken_rx.try_recv() {
                plan.wake_at(at);
            }
            plan.hint(hints.lock().expect("hints lock").take());
            if this.state.wake.take_plain() || plan.next_wake.is_some_and(|t| t <= Utc::now()) {
                plan.list = true;
            }
            if last_list.elapsed() >= this.cfg.poll {
                plan.list = true;
            }
            let started = SystemTime::now();
            let claimed = this.claim(&mut plan, &drained, room).await;
            let claimed = match claimed {
                Ok(c) => c,
                Err(e) => {
                    this.pressure.set(None);
                    tracing::warn!(error = %e, "claiming deliveries failed; retrying");
                    drop(first);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    plan.list = true;
                    continue;
                }
            };
            if let Some(at) = claimed.listed_at {
                last_list = at;
            }
            let claimed = claimed.claimed;
            if claimed.is_empty() {
                drop(first);
                let waits = this.measure(&mut plan);
                // Hinted work that could start and was not asked this time (the
                // slots went to endpoints that gave nothing): ask again at once.
                if waits.is_some() && spins < MOST_SPINS {
                    spins += 1;
                    continue;
                }
                spins = 0;
                // Nothing this worker could start waits while it sleeps.
                this.pressure.set(None);
                // Endpoints that wait with no room now get some when a request of
                // theirs ends or their throttle's next slot comes; retries at their wake.
                let mut sleep = this.cfg.poll.saturating_sub(last_list.elapsed());
                if let Some(t) = this.shares.next_release() {
                    sleep = sleep.min(t.saturating_duration_since(Instant::now()));
                }
                if let Some(at) = plan.next_wake {
                    sleep = sleep.min((at - Utc::now()).to_std().unwrap_or_default());
                }
                let waiting = plan.any_listed() || plan.has_hints() || plan.behind_shares;
                tokio::select! {
                    _ = local.notified() => {}
                    // Room again for what the listing left out: list again.
                    _ = this.shares.freed.notified(), if waiting => plan.list |= plan.behind_shares,
                    at = woken_rx.recv() => if let Some(at) = at { plan.wake_at(at) },
                    // A wake, a throttle's next slot or the poll: list again.
                    _ = tokio::time::sleep(sleep) => plan.list = true,
                }
                // Woken by a commit: let the rest of its burst arrive, so one
                // claim takes them together.
                tokio::time::sleep(GATHER).await;
                continue;
            }
            // A span for each claim that found work (an idle poll leaves none); the
            // attempts link to it.
            let claim: Option<Arc<str>> = trace::finished_span(
                "delivery.claim",
                started,
                vec![KeyValue::new("claimed", claimed.len() as i64), KeyValue::new("limit", room as i64)],
            )
            .map(Arc::from);
            spins = 0;
            for c in claimed {
                let permit = first.split(1).expect("one slot taken per claimed delivery");
                start(this.clone(), c, claim.clone(), permit, done_tx.clone());
            }
            drop(first);
            this.measure(&mut plan);
        }
    }

    /// Sets this worker's pressure from the plan, once what was claimed has
    /// started (so an endpoint just filled to its share is seen as full): since
    /// when hinted work that could start has waited. Waiting for a free slot
    /// counts: under a burst the slots are held by requests the saturated machine
    /// is slow to finish and by results waiting to be written. (So does a worker
    /// whose every slot slow endpoints of more tenants than it has slots hold:
    /// give it more concurrency.)
    fn measure(&self, plan: &mut plan::Plan) -> Option<Instant> {
        let waits = plan.pressure(&self.shares.skips());
        self.pressure.set(waits);
        waits
    }

    /// Claims what the plan asks for `room` slots (listing first if it is due),
    /// in one transaction of one statement per tenant and kind, whose commit does
    /// not wait for the disk: a claim lost in a crash leaves its rows due, to be
    /// claimed again.
    async fn claim(
        &self,
        plan: &mut plan::Plan,
        drained: &plan::Drained,
        room: usize,
    ) -> Result<Claim, hookgate_shared::store::StoreError> {
        db::bounded(self.state.db_budget(), async {
            let mut conn = db::conn(&self.state.db).await?;
            let mut listed_at = None;
            if plan.list {
                plan.relist(&conn, &self.shares, drained).await?;
                listed_at = Some(Instant::now());
            }
            let asked = plan.wants(&self.shares, room);
            if asked.by_tenant.is_empty() {
                return Ok(Claim { claimed: Vec::new(), listed_at });
            }
            let claimed = queues::claim_all(&mut conn, &asked.by_tenant, self.cfg.lease).await?;
            plan.claimed(&asked, &claimed, drained);
            Ok(Claim { claimed, listed_at })
        })
        .await
        .inspect_err(|e| db::forget_stale_plans(&self.state.db, e))
    }

    async fn deliver(&self, c: Claimed, claim: Option<Arc<str>>) -> Outcome {
        prepare::deliver(self, c, claim).await
    }

    fn state(&self) -> &AppState {
        &self.state
    }
}

/// Sends a claimed delivery, holding its slot in its endpoint's share until it ends.
fn start(
    w: Arc<Worker>,
    c: Claimed,
    claim: Option<Arc<str>>,
    permit: OwnedSemaphorePermit,
    done_tx: mpsc::UnboundedSender<Done>,
) {
    let queue = shares::queue_of(&c);
    // Held off for its spacing from the claim on, so the next claim, made while
    // this one is on its way to its throttle check, does not take another.
    if let Some(rate) = c.endpoint.as_ref().and_then(|e| e.throttle_rate) {
        w.shares.hold(&queue, throttle::interval(rate));
    }
    if let Some(rate) = c.app_throttle_rate {
        w.shares.hold_app(&queue, throttle::interval(rate));
    }
    w.shares.start(&queue);
    let slot = shares::Slot { worker: w.clone(), queue };
    // When its lease began, as near as this side knows (before the claim's transaction).
    let claimed = c.lease_ends.checked_sub(w.cfg.lease).unwrap_or_else(Instant::now);
    tokio::spawn(async move {
        let outcome = w.deliver(c, claim).await;
        drop(slot);
        let _ = done_tx.send(Done { outcome, permit, claimed });
    });
}

/// Every 5 s: samples the pending gauge and resumes deliveries paused by a claim
/// that raced with their tenant's re-enabling.
async fn sample_pending(state: AppState, metrics: EgressMetrics) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
        let resumed = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            deliveries::resume_enabled(&**conn, 1000).await
        });
        match resumed.await {
            Ok(0) => {}
            Ok(n) => tracing::info!(resumed = n, "resumed deliveries of re-enabled tenants"),
            Err(e) => tracing::debug!(error = %e, "resuming paused deliveries postponed"),
        }
        let counted = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            deliveries::pending_count(&**conn).await
        });
        if let Ok(n) = counted.await {
            metrics.pending.set(n);
        }
    }
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}
