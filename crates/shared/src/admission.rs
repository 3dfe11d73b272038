//! Admission control on creation: while delivery workers fall behind, message
//! creation (the API's and async ingress's) is held to a rate that lets them
//! catch up, shared fairly between the tenants creating, so a closed-loop burst
//! of creation cannot starve delivery.
//!
//! Workers report their pressure (how long work they could start, with slots
//! free, has waited for them; an endpoint waiting for its own share or throttle
//! does not count, so one tenant's slow endpoint never slows anyone's creation)
//! to `delivery_pressure`. Every [`TICK`] this process reads the highest, and
//! adjusts the rate it admits creations at: while pressure has been above
//! [`HIGH`] for two readings running (one is a hiccup, not a backlog), to 80 % of
//! what was asked lately; once it is below [`LOW`], open again at once. The rate
//! is split evenly between the tenants that asked in the last reading: each
//! tenant's creations are spaced by its part (a tenant sending ten times more
//! waits ten times longer, not everyone). A creation whose turn is further off
//! than [`MOST_WAIT`] is refused as busy (503): the caller retries later. A
//! reading that fails keeps the rate as it is. With no worker behind (or none at
//! all) nothing waits.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, Once,
    },
    time::{Duration, Instant},
};

use crate::{db, ids::TenantId, store::pressure};

/// How often pressure is read and the rate adjusted.
const TICK: Duration = Duration::from_millis(200);
/// Pressure above which creation is slowed, and below which it opens again.
const HIGH: i32 = 150;
const LOW: i32 = 50;
/// The lowest rate creation is held to, per process.
const MIN_RATE: f64 = 50.0;
/// The longest one creation waits for its turn; further off, it is refused.
const MOST_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Gate {
    /// Creations per second admitted, or `None`: open.
    rate: Option<f64>,
    /// Per tenant, the instant its next creation may go (a GCRA of one slot).
    next: HashMap<TenantId, Instant>,
    /// The tenants that asked since the last reading, and how many asked in the
    /// reading before (the rate's divisor).
    asking: HashSet<TenantId>,
    tenants: usize,
}

/// A creation refused because its turn is more than [`MOST_WAIT`] away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// One process's admission control; cheap to clone.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    pool: deadpool_postgres::Pool,
    budget: Duration,
    gate: Mutex<Gate>,
    asked: AtomicU64,
    started: Once,
}

impl Admission {
    pub fn new(pool: deadpool_postgres::Pool, budget: Duration) -> Self {
        Admission {
            inner: Arc::new(Inner {
                pool,
                budget,
                gate: Mutex::new(Gate::default()),
                asked: AtomicU64::new(0),
                started: Once::new(),
            }),
        }
    }

    /// Starts reading the pressure, on the current runtime; once per process
    /// (the callers that create messages start it when they start).
    pub fn start(&self) {
        let inner = self.inner.clone();
        self.inner.started.call_once(move || {
            tokio::spawn(control(inner));
        });
    }

    /// Waits for this creation's turn: at once while the gate is open; `Busy`
    /// if the tenant's turn is more than [`MOST_WAIT`] away.
    pub async fn wait(&self, tenant: &TenantId) -> Result<(), Busy> {
        self.inner.asked.fetch_add(1, Ordering::Relaxed);
        let slot = {
            let mut g = self.inner.gate.lock().expect("admission lock");
            if !g.asking.contains(tenant) {
                g.asking.insert(tenant.clone());
            }
            let Some(rate) = g.rate else { return Ok(()) };
            let spacing = Duration::from_secs_f64(g.tenants.max(1) as f64 / rate);
            let now = Instant::now();
            let slot = g.next.get(tenant).map_or(now, |n| (*n).max(now));
            if slot > now + MOST_WAIT {
                return Err(Busy);
            }
            g.next.insert(tenant.clone(), slot + spacing);
            slot
        };
        let wait = slot.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
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
        let read = db::bounded(inner.budget, async {
            let conn = db::conn(&inner.pool).await?;
            pressure::read(&**conn).await
        })
        .await;
        let asked = inner.asked.swap(0, Ordering::Relaxed) as f64 / last.elapsed().as_secs_f64().max(0.001);
        last = Instant::now();
        let mut g = inner.gate.lock().expect("admission lock");
        g.tenants = g.asking.len();
        g.asking.clear();
        let now = Instant::now();
        g.next.retain(|_, at| *at > now);
        // A failed reading says nothing: the rate stays as it is.
        let Ok(pressure) = read else { continue };
        let high = pressure > HIGH;
        // One high reading alone holds the rate where it is.
        let pressure = if high && !high_before { LOW } else { pressure };
        high_before = high;
        g.rate = next_rate(g.rate, asked, pressure);
        if g.rate.is_none() {
            g.next.clear();
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

    fn admission() -> Admission {
        let pool = crate::db::pool(
            "postgres://127.0.0.1:9/none",
            1,
            Duration::from_millis(50),
            Duration::from_millis(50),
            crate::db::Plans::Chosen,
        )
        .unwrap();
        // Never started: the test sets the rate itself.
        Admission::new(pool, Duration::from_millis(100))
    }

    #[tokio::test]
    async fn an_open_gate_admits_at_once_and_a_set_rate_spaces_each_tenants_creations() {
        let a = admission();
        let (t1, t2) = (TenantId::generate(), TenantId::generate());
        let started = Instant::now();
        for _ in 0..100 {
            a.wait(&t1).await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_millis(50), "open: {:?}", started.elapsed());
        {
            let mut g = a.inner.gate.lock().unwrap();
            g.rate = Some(200.0);
            g.tenants = 2;
        }
        // Two tenants asking: each gets half of 200/s, a creation every 10 ms.
        let started = Instant::now();
        for _ in 0..10 {
            a.wait(&t1).await.unwrap();
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(80) && took < Duration::from_millis(500), "ten at 100/s: {took:?}");
        let started = Instant::now();
        a.wait(&t2).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(20), "the other tenant's turn is its own");
    }

    #[tokio::test]
    async fn a_turn_further_off_than_the_longest_wait_is_refused() {
        let a = admission();
        let t = TenantId::generate();
        {
            let mut g = a.inner.gate.lock().unwrap();
            g.rate = Some(1.0);
            g.tenants = 1;
        }
        a.wait(&t).await.unwrap();
        // The next slot is a second away: waited for.
        let started = Instant::now();
        a.wait(&t).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(900));
        // Many waiting already, the tenant's turn three seconds away: refused at once.
        a.inner.gate.lock().unwrap().next.insert(t.clone(), Instant::now() + Duration::from_secs(3));
        let started = Instant::now();
        assert_eq!(a.wait(&t).await, Err(Busy));
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}
