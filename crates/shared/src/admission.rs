//! Admission control on creation: while delivery workers fall behind, message
//! creation (the API's and async ingress's) is held to a rate that lets them
//! catch up, so a closed-loop burst of creation cannot starve delivery.
//!
//! Workers report their pressure (how long work they could start now has waited
//! for them; an endpoint waiting for its own share or throttle does not count, so
//! one tenant's slow endpoint never slows anyone's creation) to
//! `delivery_pressure`. Every [`TICK`] this process reads the highest, and adjusts
//! the rate it admits creations at: while pressure has been above [`HIGH`] for two
//! readings running (one is a hiccup, not a backlog), to 80 % of what it admitted
//! lately; once it is below [`LOW`], open again at once (a held rate that climbed
//! back slowly kept a calm system's creations waiting). A creation waits for its
//! turn at most [`MOST_WAIT`], then goes: admission control slows, it never
//! refuses. With no worker behind (or none at all) nothing waits.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, Once,
    },
    time::{Duration, Instant},
};

use crate::{db, store::pressure};

/// How often pressure is read and the rate adjusted.
const TICK: Duration = Duration::from_millis(200);
/// Pressure above which creation is slowed, and below which it speeds up again.
const HIGH: i32 = 150;
const LOW: i32 = 50;
/// The lowest rate creation is held to, per process.
const MIN_RATE: f64 = 50.0;
/// The longest one creation waits for its turn.
const MOST_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Gate {
    /// Creations per second admitted, or `None`: open.
    rate: Option<f64>,
    /// The instant the next creation may go (a GCRA of one slot).
    next: Option<Instant>,
}

/// One process's admission control; cheap to clone.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    pool: deadpool_postgres::Pool,
    budget: Duration,
    gate: Mutex<Gate>,
    admitted: AtomicU64,
    started: Once,
}

impl Admission {
    pub fn new(pool: deadpool_postgres::Pool, budget: Duration) -> Self {
        Admission {
            inner: Arc::new(Inner {
                pool,
                budget,
                gate: Mutex::new(Gate::default()),
                admitted: AtomicU64::new(0),
                started: Once::new(),
            }),
        }
    }

    /// Waits for this creation's turn: at once while the gate is open.
    pub async fn wait(&self) {
        let inner = self.inner.clone();
        self.inner.started.call_once(move || {
            tokio::spawn(control(inner));
        });
        self.inner.admitted.fetch_add(1, Ordering::Relaxed);
        let slot = {
            let mut g = self.inner.gate.lock().expect("admission lock");
            let Some(rate) = g.rate else { return };
            let now = Instant::now();
            let slot = g.next.map_or(now, |n| n.max(now));
            g.next = Some(slot + Duration::from_secs_f64(1.0 / rate));
            slot
        };
        let wait = slot.saturating_duration_since(Instant::now()).min(MOST_WAIT);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// The rate creations are held to, if any (for tests and metrics).
    pub fn rate(&self) -> Option<f64> {
        self.inner.gate.lock().expect("admission lock").rate
    }
}

/// Reads the pressure and sets the rate, every [`TICK`], for the life of the process.
async fn control(inner: Arc<Inner>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    let mut high_before = false;
    loop {
        tick.tick().await;
        let pressure = db::bounded(inner.budget, async {
            let conn = db::conn(&inner.pool).await?;
            pressure::read(&**conn).await
        })
        .await
        // Unknown is not behind: creation is never held up by a missing signal.
        .unwrap_or(0);
        let asked = inner.admitted.swap(0, Ordering::Relaxed) as f64 / last.elapsed().as_secs_f64().max(0.001);
        last = Instant::now();
        let high = pressure > HIGH;
        // One high reading alone holds the rate where it is.
        let pressure = if high && !high_before { LOW } else { pressure };
        high_before = high;
        let mut g = inner.gate.lock().expect("admission lock");
        g.rate = next_rate(g.rate, asked, pressure);
        if g.rate.is_none() {
            g.next = None;
        }
    }
}

/// The next rate, from the current one, the rate creations were asked for
/// lately, and the workers' pressure in milliseconds.
fn next_rate(rate: Option<f64>, asked: f64, pressure: i32) -> Option<f64> {
    if pressure > HIGH {
        let base = rate.map_or(asked, |r| r.min(asked.max(MIN_RATE)));
        return Some((base * 0.8).max(MIN_RATE));
    }
    if pressure < LOW {
        return None;
    }
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_cuts_the_rate_below_what_was_asked_and_calm_opens_it_again() {
        assert_eq!(next_rate(None, 5000.0, 0), None, "no pressure, open");
        let cut = next_rate(None, 5000.0, 200).unwrap();
        assert!((cut - 4000.0).abs() < 1.0, "80 % of what was asked: {cut}");
        let again = next_rate(Some(cut), 4000.0, 200).unwrap();
        assert!(again < cut, "cut again while pressure stays: {again}");
        assert_eq!(next_rate(Some(again), 2000.0, 100), Some(again), "between the marks: held");
        assert_eq!(next_rate(Some(again), 3200.0, 10), None, "calm: open again at once");
        assert_eq!(next_rate(None, 0.0, 500), Some(MIN_RATE), "never below the floor");
    }

    #[tokio::test]
    async fn an_open_gate_admits_at_once_and_a_set_rate_spaces_creations() {
        let pool = crate::db::pool(
            "postgres://127.0.0.1:9/none",
            1,
            Duration::from_millis(50),
            Duration::from_millis(50),
            crate::db::Plans::Chosen,
        )
        .unwrap();
        let a = Admission::new(pool, Duration::from_millis(100));
        // No control task: the test sets the rate itself.
        a.inner.started.call_once(|| {});
        let started = Instant::now();
        for _ in 0..100 {
            a.wait().await;
        }
        assert!(started.elapsed() < Duration::from_millis(50), "open: {:?}", started.elapsed());
        a.inner.gate.lock().unwrap().rate = Some(100.0);
        let started = Instant::now();
        for _ in 0..10 {
            a.wait().await;
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(80) && took < Duration::from_millis(500), "ten at 100/s: {took:?}");
    }
}
