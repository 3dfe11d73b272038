//! Recording finished deliveries: in batches, with no batch poisoned by one row.
//!
//! A batch is one transaction. While Postgres is unreachable it waits (the
//! permits it holds keep the worker from claiming more). Any other failure, a
//! timeout included (it may be one row's lock), belongs to some row: the batch is
//! handed to a task of its own that records each result alone, retries the
//! refused ones, and quarantines what is still refused; the loop goes on with the
//! next batch meanwhile. If the process dies first, the leases bring the
//! deliveries back.

use std::time::Duration;

use futures_util::{stream, StreamExt};
use hookgate_shared::{
    db,
    status::DeliveryStatus,
    store::{
        deliveries::{self, Outcome, Recorded},
        StoreError,
    },
    AppState,
};
use tokio::sync::mpsc;

use super::{DeliveryConfig, Done};
use crate::metrics::EgressMetrics;

/// How often a result refused alone is written before it is quarantined.
const RECORD_TRIES: u32 = 3;
const RECORD_RETRY: Duration = Duration::from_millis(500);
/// Results of a split batch written at once.
const SPLIT_CONCURRENCY: usize = 8;

pub(super) async fn record_loop(
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
        if let Err(e) = record_batch(&state, &metrics, &cfg, &outcomes).await {
            tracing::warn!(error = %e, n = outcomes.len(), "a batch of delivery results failed; recording one by one");
            let split = split(state.clone(), metrics.clone(), cfg.clone(), outcomes);
            tokio::spawn(async move {
                split.await;
                // Its permits go back once every result is settled.
                drop(batch);
            });
        }
    }
}

async fn write(state: &AppState, cfg: &DeliveryConfig, outcomes: &[Outcome]) -> Result<Recorded, StoreError> {
    // Timed out after the commit went through, the retry writes the same again:
    // recording is idempotent (attempt ids, and fencing tokens the first write cleared).
    db::bounded(state.db_budget(), async {
        let mut conn = db::conn(&state.db).await?;
        deliveries::record(&mut conn, outcomes, cfg.disable_after).await
    })
    .await
    .inspect_err(|e| db::forget_stale_plans(&state.db, e))
}

fn count(state: &AppState, metrics: &EgressMetrics, outcomes: &[Outcome], recorded: Recorded) {
    metrics.endpoints_disabled.inc_by(recorded.disabled);
    if recorded.operational > 0 {
        state.wake.poke();
    }
    if recorded.stale > 0 {
        // Fencing at work: a claim outlived its lease and another worker owns the
        // delivery now; its attempt is kept, its verdict is the new owner's to give.
        tracing::info!(stale = recorded.stale, "results of expired claims were not applied to their deliveries");
    }
    let failed = outcomes.iter().filter(|o| o.status == DeliveryStatus::Failed).count();
    metrics.failed.inc_by(failed as u64);
}

/// Writes `outcomes` in one transaction, waiting out an outage; any other error
/// (a refusal, a timeout) is returned: the caller splits the batch.
async fn record_batch(
    state: &AppState,
    metrics: &EgressMetrics,
    cfg: &DeliveryConfig,
    outcomes: &[Outcome],
) -> Result<(), StoreError> {
    loop {
        match write(state, cfg, outcomes).await {
            Ok(recorded) => {
                count(state, metrics, outcomes, recorded);
                return Ok(());
            }
            Err(e) if e.is_unavailable() && !e.is_timeout() => {
                tracing::warn!(error = %e, n = outcomes.len(), "recording delivery results failed; retrying");
                tokio::time::sleep(RECORD_RETRY).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Each result alone, all of them once before any is tried again, so the healthy
/// ones land at once whatever the refused ones wait on; what is refused
/// [`RECORD_TRIES`] times is quarantined.
async fn split(state: AppState, metrics: EgressMetrics, cfg: DeliveryConfig, outcomes: Vec<Outcome>) {
    let mut pending = outcomes;
    for round in 1..=RECORD_TRIES {
        let results: Vec<(Outcome, Result<(), StoreError>)> = stream::iter(pending)
            .map(|o| {
                let (state, metrics, cfg) = (state.clone(), metrics.clone(), cfg.clone());
                async move {
                    let written = record_batch(&state, &metrics, &cfg, std::slice::from_ref(&o)).await;
                    (o, written)
                }
            })
            .buffer_unordered(SPLIT_CONCURRENCY)
            .collect()
            .await;
        let refused: Vec<(Outcome, StoreError)> =
            results.into_iter().filter_map(|(o, r)| r.err().map(|e| (o, e))).collect();
        if refused.is_empty() {
            return;
        }
        if round == RECORD_TRIES {
            for (o, e) in refused {
                quarantine(&state, &metrics, &o, &e).await;
            }
            return;
        }
        tokio::time::sleep(RECORD_RETRY).await;
        pending = refused.into_iter().map(|(o, _)| o).collect();
    }
}

/// The last resort for a result refused [`RECORD_TRIES`] times: its delivery is
/// marked failed (if this claim still holds it), counted, and logged here.
async fn quarantine(state: &AppState, metrics: &EgressMetrics, o: &Outcome, e: &StoreError) {
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
}
