//! Runs the background tasks (endpoint replays) in the workers, one bounded step
//! at a time, so a replay of a million messages takes turns with every other
//! task and never holds a long transaction.
//!
//! The deliveries a step makes due go through the ordinary claim, with its
//! shares per tenant and endpoint: a replay competes with live delivery exactly
//! as a burst of new messages to that endpoint would.

use std::time::Duration;

use hookgate_shared::{
    db,
    store::{replay, tasks::TaskStatus},
    AppState,
};

/// Steps tasks until none is waiting, then looks again every poll.
pub async fn run(state: AppState) {
    // The worker's pool: its statements are planned once per connection.
    let state = state.with_generic_plans();
    let batch = state.config.replay_batch;
    let idle = state.config.worker_poll.max(Duration::from_millis(50));
    loop {
        let stepped = db::bounded(state.db_budget(), async {
            let mut conn = db::conn(&state.db).await?;
            replay::step(&mut conn, batch).await
        })
        .await;
        match stepped {
            Ok(Some(s)) => {
                if let Some(e) = &s.failed {
                    tracing::warn!(tenant = %s.tenant, task = %s.task, error = %e,
                        "a background task's step failed; it is tried again after the others");
                }
                if s.sent > 0 {
                    state.wake.poke();
                }
                if s.status != TaskStatus::Running {
                    tracing::info!(tenant = %s.tenant, task = %s.task, kind = s.kind.name(), status = s.status.name(),
                        "background task ended");
                }
                // Other work on this runtime goes between two steps.
                tokio::task::yield_now().await;
            }
            Ok(None) => tokio::time::sleep(idle).await,
            Err(e) => {
                tracing::warn!(error = %e, "no background task could be stepped");
                tokio::time::sleep(idle).await;
            }
        }
    }
}
