//! This worker's pressure: since when work it could start now has waited for it,
//! reported a few times a second to `delivery_pressure`, where the processes that
//! create messages read it (`shared::admission`).

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use hookgate_shared::{db, store::pressure, AppState};

/// How often the pressure is reported (while it is above zero, or just fell to it).
const EVERY: Duration = Duration::from_millis(200);

/// Since when the oldest waiting work waits, as milliseconds after `origin`
/// (0: nothing waits).
pub(super) struct Pressure {
    origin: Instant,
    since: AtomicU64,
}

impl Default for Pressure {
    fn default() -> Self {
        Pressure { origin: Instant::now() - Duration::from_millis(1), since: AtomicU64::new(0) }
    }
}

impl Pressure {
    pub(super) fn set(&self, since: Option<Instant>) {
        let ms = since.map_or(0, |t| t.saturating_duration_since(self.origin).as_millis().max(1) as u64);
        self.since.store(ms, Ordering::Relaxed);
    }

    /// How long the oldest waiting work has waited, now.
    fn now_ms(&self) -> i32 {
        match self.since.load(Ordering::Relaxed) {
            0 => 0,
            since => (self.origin.elapsed().as_millis() as u64).saturating_sub(since).min(i32::MAX as u64) as i32,
        }
    }
}

/// Reports the pressure every [`EVERY`] while it is above zero, once when it
/// falls to zero, and every few seconds otherwise (so a reader knows this
/// worker is alive and calm).
pub(super) async fn report_loop(state: AppState, p: Arc<Pressure>) {
    let me = format!("{:016x}", rand::random::<u64>());
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(i32, Instant)> = None;
    loop {
        tick.tick().await;
        let ms = p.now_ms();
        let due = match last {
            None => true,
            Some((before, at)) => ms > 0 || before > 0 || at.elapsed() >= Duration::from_secs(2),
        };
        if !due {
            continue;
        }
        let sent = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            pressure::report(&**conn, &me, ms).await
        })
        .await;
        match sent {
            Ok(()) => last = Some((ms, Instant::now())),
            Err(e) => tracing::debug!(error = %e, "reporting delivery pressure postponed"),
        }
    }
}
