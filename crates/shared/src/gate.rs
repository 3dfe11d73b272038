//! The pre-authentication gate: a bound on the database work that callers not
//! yet known to be anyone can cause. Every well-formed unknown API key, source id
//! or portal tenant costs a query; without a bound, a flood of them from outside
//! would hold every pooled connection and real tenants would wait behind it.
//!
//! Lookups of keys and sources found live in the last minutes skip the gate (see
//! `Caches::known_keys`): a flood of junk cannot delay them. Unknown ones share a
//! quarter of the pool, waiting at most [`WAIT`] for a turn and then answered as
//! a busy database would be (503, to retry), never holding a connection longer.

use std::{future::Future, sync::Arc, time::Duration};

use tokio::sync::Semaphore;

use crate::store::StoreError;

/// How long an unknown caller's lookup may wait for its turn.
pub const WAIT: Duration = Duration::from_millis(250);

/// The lookups of unknown callers in flight at once, process-wide.
#[derive(Clone)]
pub struct PreAuthGate {
    permits: Arc<Semaphore>,
}

impl PreAuthGate {
    /// A quarter of a pool of `pool_size` connections (one at least).
    pub fn new(pool_size: usize) -> Self {
        PreAuthGate { permits: Arc::new(Semaphore::new((pool_size / 4).max(1))) }
    }

    /// Runs `lookup` at once for a caller found live lately (`known`), else as [`run`](Self::run).
    pub async fn run_unless_known<T>(
        &self,
        known: bool,
        lookup: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if known {
            lookup.await
        } else {
            self.run(lookup).await
        }
    }

    /// Runs `lookup` once a turn is free, or answers `Unavailable` after [`WAIT`].
    pub async fn run<T>(&self, lookup: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let permit = tokio::time::timeout(WAIT, self.permits.acquire()).await;
        let Ok(Ok(_permit)) = permit else {
            return Err(StoreError::Unavailable("too many lookups of unknown callers at once".into()));
        };
        lookup.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_callers_lookup_waits_a_bounded_time_for_a_turn() {
        let gate = PreAuthGate::new(7); // a quarter: one turn
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let holder = {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.run(async {
                    released.await.ok();
                    Ok::<_, StoreError>(())
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let started = tokio::time::Instant::now();
        let refused = gate.run(async { Ok::<_, StoreError>(()) }).await;
        assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");
        assert!(started.elapsed() >= WAIT, "it waited its turn first");
        release.send(()).unwrap();
        assert!(holder.await.unwrap().is_ok());
        assert!(gate.run(async { Ok::<_, StoreError>(()) }).await.is_ok(), "a free turn is taken at once");
    }
}
