//! The pruners' loop: every interval, one bounded batch after another until a
//! short one, each counted in `hookgate_pruned_rows_total`.

use std::future::Future;

use crate::{
    db,
    store::{partitions, StoreError},
    AppState,
};

/// Rows per batch: small enough that no statement holds its locks for long.
pub const BATCH: i64 = 500;

/// Batches per family per round: a backlog (the first round after an upgrade,
/// say) is worked off over several rounds, so no family starves the others.
pub const ROUND: usize = 200;

/// Runs `batch` (one bounded store call returning how many rows it removed) until
/// it removes fewer than [`BATCH`], at most [`ROUND`] times; returns the total. An error ends this round
/// (the next one tries again): pruning never competes with serving.
pub async fn drain<F, Fut>(state: &AppState, family: &'static str, batch: F) -> u64
where
    F: Fn(deadpool_postgres::Client) -> Fut,
    Fut: Future<Output = Result<u64, StoreError>>,
{
    let mut total = 0;
    for _ in 0..ROUND {
        let n = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            batch(conn).await
        })
        .await;
        match n {
            Ok(n) => {
                total += n;
                state.metrics.pruned_rows.with_label_values(&[family]).inc_by(n);
                if n < BATCH as u64 {
                    break;
                }
            }
            Err(e) => {
                tracing::debug!(family, error = %e, "pruning postponed");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(family, removed = total, "pruned rows past retention");
    }
    total
}

/// The horizons of the partitioned families now: the longest dedupe window and
/// the longest message retention in effect (`None` while Postgres is away).
pub async fn horizons(state: &AppState) -> Option<(i32, i32)> {
    let c = &state.config;
    db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        partitions::horizons(&**conn, c.retention_inbound_days, c.retention_message_days).await
    })
    .await
    .ok()
}

/// The pruners' clock: the first round one interval after the start (a process
/// that restarts in a loop does not prune in a loop), then every interval.
pub fn ticks(state: &AppState) -> tokio::time::Interval {
    let every = state.config.prune_interval;
    tokio::time::interval_at(tokio::time::Instant::now() + every, every)
}
