//! Ends an `Idempotency-Key` claim that Postgres could not take when its request
//! ended (down, or failing over), once it can again.
//!
//! Without this, a request cut off by a failover leaves its key `running` until
//! the takeover age (a minute), and every retry meanwhile is answered 409: the
//! client's own request is held up long after the database is back. Each write
//! is fenced by the claim's token, so a late one never touches a successor's
//! claim; and it stops at the takeover age, after which a retry takes the key
//! over anyway. An answer is kept only by the server that took the claim (a
//! standby promoted meanwhile may lack the effect it answers); there, a
//! message's key is released instead (the message carries the key, so the retry
//! finds it, or makes it if it was lost), and any other answer's key is left to
//! the takeover age. So are the keys of a process that stops meanwhile, of a
//! failover longer than that age, and of requests past [`MOST_PENDING`].

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use hookgate_shared::{
    db,
    store::{
        idempotency::{self, Server, StoredResponse, STALE_RUNNING},
        StoreError,
    },
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
    /// The server that took the claim: only it may keep an answer for it later.
    pub server: Server,
}

/// What the request's end should have written: its response kept for replays
/// (after a 2xx), or the key released (after a failure on our side).
pub(crate) enum End {
    /// Kept on the server that took the claim only; on another, released instead
    /// if `else_release` (the effect carries the key), else left to the takeover.
    Keep {
        stored: StoredResponse,
        else_release: bool,
    },
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
        // A refusal that a retry cannot change (a broken statement) is not retried.
        Err(e) if !passing(&e) => {
            tracing::warn!(error = %e, "an Idempotency-Key claim could not be ended; it is taken over after a minute");
            false
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

/// Tries again with a growing pause (from 250 ms, at most 4 s plus up to half
/// again of jitter, so that a crowd of settlers does not return as one) until
/// written or too late.
async fn later(state: &AppState, held: &Held, end: &End) {
    let mut pause = Duration::from_millis(250);
    loop {
        let jitter = Duration::from_millis(rand::random::<u64>() % (pause.as_millis() as u64 / 2 + 1));
        tokio::time::sleep(pause + jitter).await;
        if held.claimed.elapsed() >= STALE_RUNNING {
            tracing::warn!("an Idempotency-Key claim could not be ended before its takeover age");
            return;
        }
        match write(state, held, end).await {
            Ok(_) => return,
            Err(e) if passing(&e) => {}
            Err(e) => {
                tracing::warn!(error = %e, "an Idempotency-Key claim could not be ended; it is taken over after a minute");
                return;
            }
        }
        pause = (pause * 2).min(Duration::from_secs(4));
    }
}

/// Whether `e` is an outage that trying again can outlast (not a broken statement).
fn passing(e: &StoreError) -> bool {
    e.is_unavailable() || matches!(e, StoreError::Pool(_))
}

/// One fenced write of `end`: Ok(false) when the claim was taken over meanwhile
/// (or, for an answer to keep, when another server than the claim's answers
/// and the key may not be released).
async fn write(state: &AppState, held: &Held, end: &End) -> Result<bool, StoreError> {
    db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        match end {
            End::Keep { stored, else_release } => {
                let kept = idempotency::finish(&**conn, &held.scope, &held.key, held.token, Some(&held.server), stored)
                    .await?;
                match (kept, else_release) {
                    (true, _) => Ok(true),
                    (false, true) => idempotency::release(&**conn, &held.scope, &held.key, held.token).await,
                    (false, false) => Ok(false),
                }
            }
            End::Release => idempotency::release(&**conn, &held.scope, &held.key, held.token).await,
        }
    })
    .await
}
