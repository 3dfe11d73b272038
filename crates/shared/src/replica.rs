//! The streaming replica (`HOOKGATE_DATABASE_REPLICA_URL`): whether reads that
//! tolerate staleness may go to it now, and reading there with the primary as
//! the fallback.
//!
//! Every second the primary's WAL position is sampled (with this process's
//! monotonic clock) and the replica asked how far it has replayed. Its lag is
//! how long ago the primary was where the replica is now: 0 when it has replayed
//! the newest sample, else the age of the newest sample at or below its replay
//! position. No server's clock is read, so neither skew nor a quiet primary makes
//! a lag. The replica is read while its lag is at most `HOOKGATE_REPLICA_MAX_LAG_MS`
//! and it is a replica of the same cluster and database as `DATABASE_URL` (a
//! replica of another database is refused, never read); otherwise — behind, down,
//! promoted, another database — the primary takes its reads until a check finds
//! it good again. A check that cannot reach the primary decides nothing.

use std::collections::VecDeque;
use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::{db, store::health, store::StoreError, AppState};

/// The replicas (one per host of the URL), read in turn while usable.
#[derive(Clone)]
pub struct Replica {
    members: Arc<Vec<Member>>,
    /// Where the next read starts looking, so reads spread over the usable ones.
    next: Arc<AtomicUsize>,
}

/// One replica host: its pool and whether it may be read now.
pub struct Member {
    /// Its host and port, for logs and the metrics' `replica` label.
    pub name: String,
    pool: Pool,
    usable: AtomicBool,
}

impl Member {
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn usable(&self) -> bool {
        self.usable.load(Ordering::Relaxed)
    }

    /// Sets the replica aside until a check finds it good again; logged once per change.
    pub fn unusable(&self, why: &str) {
        if self.usable.swap(false, Ordering::Relaxed) {
            tracing::warn!(replica = %self.name, %why, "replica set aside: its reads go elsewhere");
        }
    }

    fn usable_again(&self) {
        if !self.usable.swap(true, Ordering::Relaxed) {
            tracing::info!(replica = %self.name, "replica caught up: reads that tolerate staleness go to it");
        }
    }
}

impl Replica {
    /// None is read until a first check finds it caught up.
    pub fn new(pools: Vec<(String, Pool)>) -> Self {
        let members =
            pools.into_iter().map(|(name, pool)| Member { name, pool, usable: AtomicBool::new(false) }).collect();
        Replica { members: Arc::new(members), next: Arc::new(AtomicUsize::new(0)) }
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The next usable replica in turn, if any.
    fn pick(&self) -> Option<&Member> {
        let n = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n).map(|i| &self.members[(start + i) % n]).find(|m| m.usable())
    }
}

impl AppState {
    /// Runs `work`, a read that tolerates staleness, on a usable replica (each in
    /// turn), and on the primary when none is. On a replica it is bounded by
    /// `HOOKGATE_DB_TIMEOUT_MS`. A replica that gave no connection or no answer
    /// (paused, gone) is set aside and the next usable one is tried; a read that
    /// failed otherwise there (its query cancelled by replay, say) runs again on
    /// the primary. A full replica pool sends the read to the primary without
    /// setting the replica aside.
    pub async fn read<T>(
        &self,
        work: impl AsyncFn(&tokio_postgres::Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let members = self.replica.as_ref().map_or(0, |r| r.members().len());
        for _ in 0..members {
            let Some(r) = self.replica.as_ref().and_then(Replica::pick) else { break };
            let status = r.pool().status();
            if status.available == 0 && status.size >= status.max_size {
                break;
            }
            let tried = db::bounded(self.config.db_timeout, async {
                let conn = db::conn(r.pool()).await?;
                work(&**conn).await
            })
            .await;
            match tried {
                Ok(v) => return Ok(v),
                // Gone or stalled: set aside, and the next usable replica is tried.
                Err(e @ (StoreError::Unavailable(_) | StoreError::TimedOut(_) | StoreError::Pool(_))) => {
                    r.unusable(&e.to_string())
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a read failed on the replica; the primary answers it");
                    break;
                }
            }
        }
        let conn = db::conn(&self.db).await?;
        work(&**conn).await
    }
}

/// Whether `url` can name the replicas: a connection string tokio-postgres
/// reads, with one host or several (each then read and checked on its own).
pub fn check_url(url: &str) -> Result<(), String> {
    let (plain, _) = crate::db::tls::split(url).map_err(|e| e.to_string())?;
    plain.parse::<tokio_postgres::Config>().map_err(|e| e.to_string())?;
    Ok(())
}

/// A WAL position (`X/Y`) as a number, to compare.
fn lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// The primary's positions sampled at each check, oldest first, kept as long as
/// a lag worth telling apart from "too far behind".
struct Samples {
    kept: VecDeque<(u64, Instant)>,
    keep: Duration,
}

impl Samples {
    fn add(&mut self, at: u64, now: Instant) {
        self.kept.push_back((at, now));
        while self.kept.front().is_some_and(|(_, t)| now.duration_since(*t) > self.keep) {
            self.kept.pop_front();
        }
    }

    /// How long ago the primary was at `replayed`: 0 at or past the newest sample;
    /// at least the oldest sample's age when behind every one kept.
    fn lag(&self, replayed: u64, now: Instant) -> Duration {
        match self.kept.iter().rev().find(|(at, _)| *at <= replayed) {
            Some((at, _)) if Some(at) == self.kept.back().map(|(a, _)| a) => Duration::ZERO,
            // The newest sample the replica has reached: it is behind by the age of
            // the first sample it has not.
            Some((at, _)) => {
                let next = self.kept.iter().find(|(a, _)| a > at).map(|(_, t)| *t).unwrap_or(now);
                now.duration_since(next)
            }
            None => self.kept.front().map_or(Duration::MAX, |(_, t)| now.duration_since(*t)),
        }
    }
}

/// One check of one replica against the primary's position just read: its lag,
/// or why it must not be read.
async fn check(
    state: &AppState,
    replica: &Member,
    primary: &health::Position,
    samples: &Samples,
) -> Result<Duration, String> {
    let budget = state.db_budget();
    let now = Instant::now();
    let theirs = db::bounded(budget, async { health::position(&**db::conn(replica.pool()).await?).await })
        .await
        .map_err(|e| e.to_string())?;
    if (theirs.system, &theirs.database) != (primary.system, &primary.database) {
        return Err(format!(
            "it is not a replica of DATABASE_URL's database (cluster {} database {:?}, not {} {:?})",
            theirs.system, theirs.database, primary.system, primary.database
        ));
    }
    if !theirs.in_recovery {
        return Err("it is not in recovery (promoted?): not a replica of the primary any more".into());
    }
    let replayed = theirs.lsn.as_deref().and_then(lsn).ok_or("it has replayed nothing yet")?;
    Ok(samples.lag(replayed, now))
}

/// Checks every replica every second for as long as the process runs, and
/// keeps `hookgate_replica_lag_seconds` and `hookgate_replica_in_use` current.
/// A round that cannot ask the primary where it is decides nothing.
pub async fn watch(state: AppState) {
    let Some(replica) = state.replica.clone() else { return };
    let max = state.config.replica_max_lag;
    let mut samples = Samples { kept: VecDeque::new(), keep: max * 2 + Duration::from_secs(5) };
    // Every member has its gauge from the start, so a dashboard (or a test)
    // reading before the first round ends sees each replica, not some of them.
    for member in replica.members() {
        state.metrics.replica_in_use.with_label_values(&[&member.name]).set(i64::from(member.usable()));
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let primary =
            db::bounded(state.db_budget(), async { health::position(&**db::conn(&state.db).await?).await }).await;
        let Ok(primary) = primary else { continue };
        if let Some(at) = primary.lsn.as_deref().and_then(lsn) {
            samples.add(at, Instant::now());
        }
        for member in replica.members() {
            let lag = state.metrics.replica_lag.with_label_values(&[&member.name]);
            match check(&state, member, &primary, &samples).await {
                Ok(behind) if behind <= max => {
                    lag.set(behind.as_secs_f64());
                    member.usable_again();
                }
                Ok(behind) => {
                    let secs = behind.as_secs_f64().min(86_400.0);
                    lag.set(secs);
                    member.unusable(&format!("{secs:.1} s behind, more than {max:?}"));
                }
                Err(why) => {
                    lag.set(-1.0);
                    member.unusable(&why);
                }
            }
            state.metrics.replica_in_use.with_label_values(&[&member.name]).set(i64::from(member.usable()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_positions_read_as_numbers_in_order() {
        assert_eq!(lsn("0/16B3748"), Some(0x16B3748));
        assert!(lsn("1/0").unwrap() > lsn("0/FFFFFFFF").unwrap());
        assert_eq!(lsn("junk"), None);
    }

    #[test]
    fn the_lag_is_how_long_ago_the_primary_was_where_the_replica_is() {
        let t0 = Instant::now();
        let s = |secs| t0 + Duration::from_secs(secs);
        let mut samples = Samples { kept: VecDeque::new(), keep: Duration::from_secs(30) };
        for (i, at) in [100, 200, 200, 300].into_iter().enumerate() {
            samples.add(at, s(i as u64));
        }
        let now = s(10);
        assert_eq!(samples.lag(300, now), Duration::ZERO, "caught up with the newest sample");
        assert_eq!(samples.lag(400, now), Duration::ZERO, "past it: replayed since");
        assert_eq!(samples.lag(250, now), Duration::from_secs(7), "behind since the primary passed 250, at 3 s");
        assert_eq!(samples.lag(200, now), Duration::from_secs(7));
        assert_eq!(samples.lag(150, now), Duration::from_secs(9), "behind since the primary reached 200, at 1 s");
        assert_eq!(samples.lag(50, now), Duration::from_secs(10), "behind every sample: at least the oldest's age");
        let quiet = Samples { kept: [(500, s(0)), (500, s(5))].into_iter().collect(), keep: Duration::from_secs(30) };
        assert_eq!(quiet.lag(500, s(60)), Duration::ZERO, "a quiet primary makes no lag");
    }
}
