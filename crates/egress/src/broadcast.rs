//! Runs broadcasts (`v1.message.broadcast`): each step publishes the task's message
//! to a bounded batch of the tenant's applications, within the tenant's
//! `messagesPerSecond` and `messagesPerDay`, in one transaction with the task's
//! cursor (`store::broadcast`), so a crash neither loses nor repeats a batch.
//!
//! A quota that is spent holds the broadcast back rather than failing it: it
//! goes on where it stopped once the rate or the day allows, and never skips an
//! application.

use std::time::Duration;

use hookgate_shared::{
    db, limits,
    quota::Limit,
    store::{
        broadcast::{self, Outcome},
        StoreError,
    },
    AppState,
};

/// Applications a step publishes to at most: one statement each, in one
/// transaction, kept small: it holds the tenant's quota row and the endpoints' wake
/// rows that other writers wait for.
const BATCH: i64 = 10;

/// What one step did.
struct Stepped {
    published: u64,
    /// A quota held the step back: wait before the next.
    held: bool,
    finished: bool,
}

/// Steps broadcasts until none is waiting, then looks again every poll.
pub async fn run(state: AppState) {
    let idle = state.config.worker_poll.max(Duration::from_millis(50));
    loop {
        // A step waits on Redis (the rate) as well as Postgres, once per application.
        let stepped = db::bounded(state.db_budget() * 4, step(&state)).await;
        match stepped {
            Ok(Some(s)) => {
                if s.published > 0 {
                    state.wake.poke();
                }
                if s.finished {
                    tracing::info!("a broadcast finished");
                }
                if s.held {
                    tokio::time::sleep(idle.max(Duration::from_millis(500))).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
            Ok(None) => tokio::time::sleep(idle).await,
            Err(e) => {
                tracing::warn!(error = %e, "a broadcast step failed; it is tried again");
                tokio::time::sleep(idle).await;
            }
        }
    }
}

/// One step of the broadcast stepped least lately; `None` when none runs.
async fn step(state: &AppState) -> Result<Option<Stepped>, StoreError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await?;
    let Some(held) = broadcast::pick(&*tx).await? else { return Ok(None) };
    let apps = broadcast::apps_after(&*tx, &held.tenant, &held.cursor, BATCH).await?;
    let quotas = limits::quotas(state, &held.tenant).await?;
    let day_cap = quotas.limit(Limit::MessagesPerDay).map(|c| c as i64);
    let (mut last, mut scanned, mut published, mut sent, mut stopped) = (None, 0i64, 0u64, 0i64, false);
    for app in &apps {
        // One message per application, each under the tenant's message rate, as
        // one created through the API would be.
        if limits::rate(state, &held.tenant, &quotas, Limit::MessagesPerSecond).await.is_err() {
            stopped = true;
            break;
        }
        match broadcast::publish_one(&*tx, &held.tenant, app, &held.message, day_cap).await? {
            Outcome::OverCap => {
                stopped = true;
                break;
            }
            Outcome::Sent(fanned) => {
                published += fanned;
                sent += 1;
            }
            // Published by an earlier run of this task: nothing again.
            Outcome::Already => {}
        }
        scanned += 1;
        last = Some(app.as_str().to_owned());
    }
    let finished = !stopped && (apps.len() as i64) < BATCH;
    broadcast::advance(&*tx, &held.tenant, &held.task, last.as_deref(), (scanned, sent), finished).await?;
    tx.commit().await?;
    if stopped {
        tracing::info!(tenant = %held.tenant, task = %held.task, "a broadcast waits for the tenant's message quota");
    }
    Ok(Some(Stepped { published, held: stopped, finished }))
}
