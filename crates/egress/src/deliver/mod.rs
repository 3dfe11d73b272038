//! The delivery worker: claims due deliveries in batches, sends each with bounded
//! concurrency, and writes the results back in batches.
//!
//! No Postgres connection is held while a request is in flight: a connection is
//! taken to claim, returned, and taken again by the recorder. A delivery whose
//! worker dies mid-send becomes due again when its lease runs out.

pub mod forward;
mod prepare;
pub mod schedule;
pub mod send;
mod throttle;

use hookgate_shared::status::DeliveryStatus;
use std::{sync::Arc, time::Duration};

use hookgate_shared::{
    db,
    store::deliveries::{self, Claimed, Outcome, Recorded},
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
            batch: c.worker_concurrency.min(500),
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
}

type Done = (Outcome, OwnedSemaphorePermit);

impl Worker {
    pub fn new(state: AppState, metrics: EgressMetrics) -> Self {
        let cfg = DeliveryConfig::from_config(&state.config);
        let guard = Guard::new(state.config.egress_allow_networks.clone());
        let sender = Sender::new(guard, cfg.connect_timeout, cfg.timeout, state.config.egress_proxy.as_deref());
        let throttle = Arc::new(throttle::Throttle::new(state.redis.clone()));
        Worker { state, metrics, cfg, sender, throttle }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        let wake = Arc::new(Notify::new());
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        // Helpers live exactly as long as this future: dropping it stops them.
        let _helpers = AbortOnDrop(vec![
            tokio::spawn(hookgate_shared::store::notify::listen(self.state.config.database_url.clone(), wake.clone())),
            tokio::spawn(sample_pending(self.state.clone(), self.metrics.clone())),
            tokio::spawn(record_loop(self.state.clone(), self.metrics.clone(), self.cfg.clone(), done_rx)),
        ]);
        let local = self.state.wake.local();
        let permits = Arc::new(Semaphore::new(self.cfg.concurrency));
        let this = Arc::new(self);
        loop {
            // Wait for room, then claim only as many as there is room for.
            let first = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
            let room = (permits.available_permits() + 1).min(this.cfg.batch);
            let claimed = match this.claim(room).await {
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
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = local.notified() => {}
                    _ = tokio::time::sleep(this.cfg.poll) => {}
                }
                continue;
            }
            let mut first = Some(first);
            for c in claimed {
                let permit = match first.take() {
                    Some(p) => p,
                    None => permits.clone().acquire_owned().await.expect("the semaphore is never closed"),
                };
                let (this, done_tx) = (this.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let outcome = this.deliver(c).await;
                    let _ = done_tx.send((outcome, permit));
                });
            }
        }
    }

    async fn claim(&self, n: usize) -> Result<Vec<Claimed>, hookgate_shared::store::StoreError> {
        db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            deliveries::claim(&**conn, n as i64, self.cfg.lease).await
        })
        .await
    }

    async fn deliver(&self, c: Claimed) -> Outcome {
        prepare::deliver(self, c).await
    }

    fn state(&self) -> &AppState {
        &self.state
    }
}

/// Writes finished deliveries in batches. If the process dies first, the leases
/// bring the deliveries back.
async fn record_loop(
    state: AppState,
    metrics: EgressMetrics,
    cfg: DeliveryConfig,
    mut rx: mpsc::UnboundedReceiver<Done>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < 1000 {
            match rx.try_recv() {
                Ok(d) => batch.push(d),
                Err(_) => break,
            }
        }
        let outcomes: Vec<Outcome> = batch.iter().map(|(o, _)| o.clone()).collect();
        record_batch(&state, &metrics, &cfg, &outcomes).await;
        // The permits go back only now: while Postgres is away, the worker claims no more.
        drop(batch);
    }
}

/// How often one result that fails alone is written before it is quarantined.
const RECORD_TRIES: u32 = 3;
const RECORD_RETRY: Duration = Duration::from_millis(500);

async fn write(
    state: &AppState,
    cfg: &DeliveryConfig,
    outcomes: &[Outcome],
) -> Result<Recorded, hookgate_shared::store::StoreError> {
    // Timed out after the commit went through, the retry writes the same again:
    // recording is idempotent.
    db::bounded(state.db_budget(), async {
        let mut conn = db::conn(&state.db).await?;
        deliveries::record(&mut conn, outcomes, cfg.disable_after).await
    })
    .await
}

fn count(metrics: &EgressMetrics, outcomes: &[Outcome], recorded: Recorded) {
    metrics.endpoints_disabled.inc_by(recorded.disabled);
    if recorded.stale > 0 {
        // Fencing at work: a claim outlived its lease and another worker owns the
        // delivery now; its attempt is kept, its verdict is the new owner's to give.
        tracing::info!(stale = recorded.stale, "results of expired claims were not applied to their deliveries");
    }
    let failed = outcomes.iter().filter(|o| o.status == DeliveryStatus::Failed).count();
    metrics.failed.inc_by(failed as u64);
}

/// Records a batch in one transaction. While Postgres is unavailable it waits and
/// tries again; any other failure belongs to some row, so the batch is split and
/// each result recorded alone: one bad row cannot hold the others.
async fn record_batch(state: &AppState, metrics: &EgressMetrics, cfg: &DeliveryConfig, outcomes: &[Outcome]) {
    loop {
        match write(state, cfg, outcomes).await {
            Ok(recorded) => return count(metrics, outcomes, recorded),
            Err(e) if e.is_unavailable() => {
                tracing::warn!(error = %e, n = outcomes.len(), "recording delivery results failed; retrying");
                tokio::time::sleep(RECORD_RETRY).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, n = outcomes.len(), "a batch of delivery results failed; recording one by one");
                break;
            }
        }
    }
    for o in outcomes {
        record_one(state, metrics, cfg, o).await;
    }
}

/// Records one result; after [`RECORD_TRIES`] refusals (not outages) it is
/// quarantined: its delivery is marked failed, counted, and logged here.
async fn record_one(state: &AppState, metrics: &EgressMetrics, cfg: &DeliveryConfig, o: &Outcome) {
    let mut refused = 0;
    loop {
        match write(state, cfg, std::slice::from_ref(o)).await {
            Ok(recorded) => return count(metrics, std::slice::from_ref(o), recorded),
            Err(e) if e.is_unavailable() => tokio::time::sleep(RECORD_RETRY).await,
            Err(e) => {
                refused += 1;
                if refused < RECORD_TRIES {
                    tokio::time::sleep(RECORD_RETRY).await;
                    continue;
                }
                let marked = db::bounded(state.db_budget(), async {
                    let conn = db::conn(&state.db).await?;
                    deliveries::quarantine(&**conn, o).await
                })
                .await;
                metrics.records_quarantined.inc();
                tracing::error!(
                    tenant = %o.tenant_id, app = %o.app_id, msg = %o.msg_id, endpoint = %o.endpoint_id,
                    error = %e, marked_failed = ?marked,
                    "a delivery result cannot be recorded; quarantined (marked failed, resendable)"
                );
                return;
            }
        }
    }
}

async fn sample_pending(state: AppState, metrics: EgressMetrics) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
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
