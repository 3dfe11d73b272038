//! Deletes inbound events older than their source's retention, in bounded batches,
//! so the table never sees a long lock. The dedupe window equals the retention.

use std::time::Duration;

use hookgate_shared::{db, store::inbound_events, AppState};

const BATCH: i64 = 1000;

pub async fn run(state: AppState, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let mut total = 0;
        loop {
            let n = db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                inbound_events::prune(&**conn, BATCH).await
            })
            .await;
            match n {
                Ok(n) => {
                    total += n;
                    if n < BATCH as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "inbound pruning skipped");
                    break;
                }
            }
        }
        if total > 0 {
            tracing::info!(deleted = total, "pruned inbound events past retention");
        }
    }
}
