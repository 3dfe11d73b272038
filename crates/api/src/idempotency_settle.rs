//! Ends an `Idempotency-Key` claim that Postgres could not take when its request
//! ended (down, or failing over), once it can again.
//!
//! Without this, a request cut off by a failover leaves its key `running` until
//! the takeover age (a minute), and every retry meanwhile is answered 409: the
//! client's own request is held up long after the database is back. Each write
//! is fenced by the claim's token, so a late one never touches a successor's
//! claim; and it stops at the takeover age, after which a retry takes the key
//! over anyway.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use hookgate_shared::{
    db,
    store::idempotency::{self, StoredResponse, STALE_RUNNING},
    AppState,
};

/// Settlers waiting at once, process-wide. Past this (a long outage under heavy
/// traffic), a claim is left to the takeover age rather than piling up retries
/// that would all fall on the database the moment it returns.
const MOST_PENDING: usize = 1024;
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// A claimed key and the fencing token of one request's claim: only the holder
/// may store the response or release the key.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub scope: String,
    pub key: String,
    pub token: i64,
    /// When the claim was made: the settler gives up at the takeover age.
    pub claimed: Instant,
}

/// What the request's end should have written: its response kept for replays
/// (after a 2xx), or the key released (after a failure on our side).
pub(crate) enum End {
    Keep(StoredResponse),
    Release,
}

/// Writes `end` now, under the request's own bound; if Postgres cannot take it,
/// again in the background (see the module's doc). True if written now.
pub(crate) async fn settle(state: &AppState, held: &Held, end: End) -> bool {
    match write(state, held, &end).await {
        Ok(done) => {
            if !done {
                tracing::info!("an Idempotency-Key was taken over meanwhile; its new holder keeps it");
            }
            true
        }
        Err(e) => {
            if PENDING.fetch_add(1, Ordering::Relaxed) >= MOST_PENDING {
                PENDING.fetch_sub(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "an Idempotency-Key claim could not be ended; it is taken over after a minute");
                return false;
            }
            tracing::info!(error = %e, "an Idempotency-Key claim could not be ended yet; trying again");
            let (state, held) = (state.clone(), held.clone());
            tokio::spawn(async move {
                later(&state, &held, &end).await;
                PENDING.fetch_sub(1, Ordering::Relaxed);
            });
            false
        }
    }
}

/// Tries again with a growing pause (from 250 ms, at most 4 s, jittered so that
/// a crowd of settlers does not return as one) until written or too late.
async fn later(state: &AppState, held: &Held, end: &End) {
    let mut pause = Duration::from_millis(250);
    loop {
        let jitter = Duration::from_millis(rand::random::<u64>() % (pause.as_millis() as u64 / 2 + 1));
        tokio::time::sleep(pause + jitter).await;
        if held.claimed.elapsed() >= STALE_RUNNING {
            tracing::warn!("an Idempotency-Key claim could not be ended before its takeover age");
            return;
        }
        if write(state, held, end).await.is_ok() {
            return;
        }
        pause = (pause * 2).min(Duration::from_secs(4));
    }
}

/// One fenced write of `end`: Ok(false) when the claim was taken over meanwhile.
async fn write(state: &AppState, held: &Held, end: &End) -> Result<bool, hookgate_shared::store::StoreError> {
    db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        match end {
            End::Keep(stored) => idempotency::finish(&**conn, &held.scope, &held.key, held.token, stored).await,
            End::Release => idempotency::release(&**conn, &held.scope, &held.key, held.token).await,
        }
    })
    .await
}
