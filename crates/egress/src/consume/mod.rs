//! Broker sources: each worker process leases some of them (one process per
//! source at a time, `store::broker_sources::lease`) and runs a consumer for
//! each, which turns broker messages into messages of the send API and
//! acknowledges each only after its message is committed ([`turn`]).
//!
//! A process takes up to four more sources per look while others may be
//! waiting, so the sources spread over the worker processes; a source whose lease a process
//! cannot renew (it was disabled or deleted, its tenant disabled, the database
//! unreachable past the lease) has its consumer stopped.

pub mod map;
mod turn;

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    ids::{BrokerSourceId, TenantId},
    store::broker_sources,
    AppState,
};
use tokio::sync::watch;

use crate::{deliver::senders::Senders, metrics::EgressMetrics, publish::Publisher};

/// How long a lease lasts at most; renewed six times in it. Shorter with a
/// shorter worker poll (a test's), so a dead process's sources pass on sooner.
const LEASE: Duration = Duration::from_secs(30);
/// Sources one process consumes at most.
const MOST_HELD: i64 = 64;

struct Running {
    updated_at: DateTime<Utc>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Runs until the process stops.
pub async fn run(state: AppState, publisher: Arc<Publisher>, metrics: EgressMetrics) {
    let me = format!("hookgate-{}", ulid::Ulid::new());
    let lease = (state.config.worker_poll * 100).clamp(Duration::from_secs(5), LEASE);
    let look_every = lease / 6;
    let mut running: HashMap<(TenantId, BrokerSourceId), Running> = HashMap::new();
    // When the last renewal that succeeded was asked for: the database set the
    // lease's end after that moment, so it holds at least until then + lease.
    let mut renewed = Instant::now();
    let senders = Arc::new(Senders::new(&state.config, state.own_services.clone()));
    tokio::spawn(prune(state.clone()));
    loop {
        let asked = Instant::now();
        // Bounded well within the lease, so a stalled database is noticed in time.
        let held = db::bounded(state.db_budget().min(lease / 4), async {
            let conn = db::conn(&state.db).await?;
            broker_sources::lease(&**conn, &me, lease.as_secs_f64(), MOST_HELD).await
        })
        .await;
        match held {
            Ok(held) => {
                renewed = asked;
                let wanted: HashMap<_, _> =
                    held.into_iter().map(|s| ((s.tenant_id.clone(), s.id.clone()), s)).collect();
                // Stopped: no longer held, changed, or ended on its own.
                running.retain(|key, r| {
                    let keep = !r.task.is_finished() && wanted.get(key).is_some_and(|s| s.updated_at == r.updated_at);
                    if !keep {
                        let _ = r.stop.send(true);
                    }
                    keep
                });
                for (key, source) in wanted {
                    if running.contains_key(&key) {
                        continue;
                    }
                    let (stop, stopped) = watch::channel(false);
                    let updated_at = source.updated_at;
                    let task = tokio::spawn(turn::consume(
                        state.clone(),
                        publisher.clone(),
                        metrics.clone(),
                        senders.clone(),
                        source,
                        me.clone(),
                        stopped,
                    ));
                    running.insert(key, Running { updated_at, stop, task });
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "leasing broker sources failed; it is tried again");
                // Well before the lease could pass to another process, stop ours.
                if renewed.elapsed() >= lease / 2 {
                    for (_, r) in running.drain() {
                        let _ = r.stop.send(true);
                    }
                }
            }
        }
        metrics.broker_sources_consuming.set(running.len() as i64);
        tokio::time::sleep(look_every).await;
    }
}

/// Forgets dead letters past 30 days, every hour, apart from the leases (a
/// long prune must not keep them from being renewed).
async fn prune(state: AppState) {
    loop {
        loop {
            let p = db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                broker_sources::prune_dead_letters(&**conn).await
            });
            match p.await {
                Ok(n) if n >= 10_000 => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "pruning broker dead letters failed; it runs again");
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
