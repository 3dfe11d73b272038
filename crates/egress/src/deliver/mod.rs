//! The delivery worker: claims due deliveries in batches, fairly between tenants
//! and endpoints (`shares.rs`, `store::queues`), sends each with bounded
//! concurrency, and writes the results back in batches.
//!
//! No Postgres connection is held while a request is in flight: a connection is
//! taken to claim, returned, and taken again by the recorder. A delivery whose
//! worker dies mid-send becomes due again when its lease runs out.

pub mod forward;
mod prepare;
mod record;
mod round;
pub mod schedule;
pub mod send;
mod shares;
mod throttle;

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use hookgate_shared::{
    db,
    store::{
        deliveries::{self, Claimed, Outcome},
        queues,
    },
    trace::{self, KeyValue},
    AppState,
};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

use crate::{metrics::EgressMetrics, ssrf::Guard};
use send::Sender;

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
    sender: Sender,
    throttle: Arc<throttle::Throttle>,
    shares: shares::Shares,
}

/// A finished delivery and the concurrency permit it holds until it is recorded.
type Done = (Outcome, OwnedSemaphorePermit);

impl Worker {
    pub fn new(state: AppState, metrics: EgressMetrics) -> Self {
        // The claim and the recorder run the same statements over and over:
        // planned once per connection (`db::Plans::Generic`).
        let state = state.with_generic_plans();
        let cfg = DeliveryConfig::from_config(&state.config);
        let guard = Guard::new(state.config.egress_allow_networks.clone());
        let sender = Sender::new(guard, cfg.connect_timeout, cfg.timeout, state.config.egress_proxy.as_deref());
        let throttle = Arc::new(throttle::Throttle::new(state.redis.clone()));
        let shares = shares::Shares::new(cfg.concurrency);
        Worker { state, metrics, cfg, sender, throttle, shares }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        let wake = Arc::new(Notify::new());
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        let local = self.state.wake.local();
        let permits = Arc::new(Semaphore::new(self.cfg.concurrency));
        let this = Arc::new(self);
        // Helpers live exactly as long as this future: dropping it stops them.
        let _helpers = AbortOnDrop(vec![
            tokio::spawn(hookgate_shared::store::notify::listen(this.state.config.database_url.clone(), wake.clone())),
            tokio::spawn(sample_pending(this.state.clone(), this.metrics.clone())),
            tokio::spawn(record::record_loop(this.state.clone(), this.metrics.clone(), this.cfg.clone(), done_rx)),
        ]);
        let mut round = round::Round::default();
        loop {
            // Wait for room, then take the free slots and claim only as many as
            // were taken: a claimed delivery never waits for a slot while its lease runs.
            let mut first = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
            if let Some(more) = shares::reserve(&permits, this.cfg.batch - 1) {
                first.merge(more);
            }
            let room = first.num_permits();
            let started = SystemTime::now();
            let (claimed, listed) = match this.claim(&mut round, room).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming deliveries failed; retrying");
                    drop(first);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if claimed.is_empty() {
                drop(first);
                // Endpoints that wait with no room now get some when a request of
                // theirs ends or their throttle's next slot comes.
                let poll = match this.shares.next_release() {
                    Some(t) => t.saturating_duration_since(Instant::now()).min(this.cfg.poll),
                    None => this.cfg.poll,
                };
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = local.notified() => {}
                    _ = this.shares.freed.notified(), if listed => {}
                    _ = tokio::time::sleep(poll) => {}
                }
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
            for c in claimed {
                let permit = first.split(1).expect("one slot taken per claimed delivery");
                start(this.clone(), c, claim.clone(), permit, done_tx.clone());
            }
        }
    }

    /// Claims from the endpoints in turn what each may start now, up to `room` in
    /// all. Returns the claimed deliveries and whether any endpoint was listed.
    async fn claim(
        &self,
        round: &mut round::Round,
        room: usize,
    ) -> Result<(Vec<Claimed>, bool), hookgate_shared::store::StoreError> {
        db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            let wants = self.shares.allocate(round.queues(&conn).await?, room);
            let claimed = queues::claim(&conn, &wants, self.cfg.lease).await?;
            round.claimed(&wants, &claimed);
            Ok((claimed, round.any_listed()))
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
    let rates = [c.endpoint.as_ref().and_then(|e| e.throttle_rate), c.app_throttle_rate];
    if let Some(rate) = rates.into_iter().flatten().min() {
        w.shares.hold(&queue, throttle::interval(rate));
    }
    w.shares.start(&queue);
    let slot = shares::Slot { worker: w.clone(), queue };
    tokio::spawn(async move {
        let outcome = w.deliver(c, claim).await;
        drop(slot);
        let _ = done_tx.send((outcome, permit));
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
