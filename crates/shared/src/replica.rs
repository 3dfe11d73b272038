//! The streaming replica (`HOOKGATE_DATABASE_REPLICA_URL`): whether reads that
//! tolerate staleness may go to it now.
//!
//! Checked every second against the primary: caught up (it has replayed what the
//! primary had written when asked) or behind by less than
//! `HOOKGATE_REPLICA_MAX_LAG_MS` (since the last transaction it replayed was
//! committed), it serves [`crate::AppState::read_conn`]; behind, down, or no
//! longer a replica (promoted), the primary does until a check finds it good
//! again. A replica that gives no connection is set aside at once, by the read
//! that found it so.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};
use std::time::Duration;

use deadpool_postgres::Pool;

use crate::{db, store::health, AppState};

/// The replica's pool and whether it may be read now.
#[derive(Clone)]
pub struct Replica {
    pool: Pool,
    usable: Arc<AtomicBool>,
}

impl Replica {
    /// Not used until a first check finds it caught up.
    pub fn new(pool: Pool) -> Self {
        Replica { pool, usable: Arc::new(AtomicBool::new(false)) }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn usable(&self) -> bool {
        self.usable.load(Ordering::Relaxed)
    }

    /// Sets the replica aside until a check finds it good again; logged once per change.
    pub fn unusable(&self, why: &str) {
        if self.usable.swap(false, Ordering::Relaxed) {
            tracing::warn!(%why, "replica set aside: reads go to the primary");
        }
    }

    fn usable_again(&self) {
        if !self.usable.swap(true, Ordering::Relaxed) {
            tracing::info!("replica caught up: reads that tolerate staleness go to it");
        }
    }
}

/// How far behind `state`'s replica is, in seconds (0 when caught up), or why it
/// cannot be read.
async fn lag(state: &AppState, replica: &Replica) -> Result<f64, String> {
    let budget = state.db_budget();
    let position = db::bounded(budget, async { health::primary_position(&**db::conn(&state.db).await?).await })
        .await
        .map_err(|e| format!("the primary's position: {e}"))?;
    let at = db::bounded(budget, async { health::replica_state(&**db::conn(replica.pool()).await?, &position).await })
        .await
        .map_err(|e| e.to_string())?;
    if !at.in_recovery {
        return Err("it is not in recovery (promoted?): not a replica of the primary any more".into());
    }
    Ok(match at.caught_up {
        true => 0.0,
        // Never replayed a transaction yet, and behind: as far behind as can be.
        false => at.since_last_replay.unwrap_or(f64::INFINITY).max(0.0),
    })
}

/// Checks the replica every second for as long as the process runs, and keeps
/// `hookgate_replica_lag_seconds` and `hookgate_replica_in_use` current.
pub async fn watch(state: AppState) {
    let Some(replica) = state.replica.clone() else { return };
    let max = state.config.replica_max_lag.as_secs_f64();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match lag(&state, &replica).await {
            Ok(seconds) if seconds <= max => {
                state.metrics.replica_lag.set(seconds);
                replica.usable_again();
            }
            Ok(seconds) => {
                state.metrics.replica_lag.set(seconds.min(1e9));
                replica.unusable(&format!("{seconds:.1} s behind, more than {max} s"));
            }
            Err(why) => {
                state.metrics.replica_lag.set(-1.0);
                replica.unusable(&why);
            }
        }
        state.metrics.replica_in_use.set(i64::from(replica.usable()));
    }
}
