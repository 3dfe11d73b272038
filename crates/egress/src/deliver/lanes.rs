//! Fair shares of a worker's requests between endpoints, and the lanes that hold
//! what an endpoint cannot take now.
//!
//! An endpoint may hold at most `C / (k + 1)` of the worker's `C` requests in
//! flight, `k` being the endpoints with requests in flight (itself included), so
//! there is always room for one more endpoint. A delivery claimed for an endpoint
//! at its share, or one its `throttleRate` holds off, is parked in the endpoint's
//! lane rather than sent, and the endpoint's other due deliveries follow it there
//! in one statement: what is left in the shared due order is what can be sent now,
//! so one endpoint's backlog, slowness or throttle delays nobody else. The lanes
//! are served round robin, each no faster than its endpoint takes deliveries.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hookgate_shared::{
    db,
    store::{
        deliveries::Claimed,
        lanes::{self, Lane},
    },
};
use tokio::sync::{mpsc, Notify, Semaphore};

use super::{Done, Worker};

/// Lanes listed and served per round, and most deliveries taken from one lane at once.
const ROUND: i64 = 256;
const SERVE_MAX: usize = 100;
/// Most due deliveries parked by one statement, and how often one endpoint's are.
const PARK_MAX: i64 = 5_000;
const PARK_EVERY: Duration = Duration::from_millis(500);
/// A round runs at least this often, and on every freed slot or park request.
const TICK: Duration = Duration::from_millis(100);
/// How long an endpoint counts as throttled after its throttle last spaced it.
const PACED_FOR: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    inflight: HashMap<Lane, usize>,
    /// Not before this instant: the endpoint's throttle spacing.
    held: HashMap<Lane, Instant>,
    /// Endpoints a throttle spaced lately: their lanes give one delivery per slot.
    paced: HashMap<Lane, Instant>,
    to_park: HashSet<Lane>,
    parked_at: HashMap<Lane, Instant>,
}

/// One worker's view of the endpoints it sends to.
pub(crate) struct Shares {
    concurrency: usize,
    state: Mutex<State>,
    wake: Notify,
}

impl Shares {
    pub(crate) fn new(concurrency: usize) -> Self {
        Shares { concurrency, state: Mutex::new(State::default()), wake: Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("the shares lock is never poisoned")
    }

    /// The share of an endpoint when `active` endpoints (itself included) have
    /// requests in flight.
    fn share(&self, active: usize) -> usize {
        (self.concurrency / (active + 1)).max(1)
    }

    fn room_in(&self, s: &State, lane: &Lane) -> usize {
        if s.held.get(lane).is_some_and(|t| *t > Instant::now()) {
            return 0;
        }
        let mine = s.inflight.get(lane).copied().unwrap_or(0);
        let active = s.inflight.len() + usize::from(mine == 0);
        self.share(active).saturating_sub(mine)
    }

    /// How many a lane gives now: its room, or one per slot for a throttled one
    /// (more would find the throttle closed and go back to the lane).
    fn lane_room(&self, lane: &Lane) -> usize {
        let s = self.lock();
        let room = self.room_in(&s, lane);
        match s.paced.contains_key(lane) {
            true => room.min(1),
            false => room,
        }
    }

    /// Takes a slot for the endpoint if it is within its share and not held off;
    /// false: the delivery is to be parked.
    pub(crate) fn try_start(&self, lane: &Lane) -> bool {
        let mut s = self.lock();
        if self.room_in(&s, lane) == 0 {
            return false;
        }
        *s.inflight.entry(lane.clone()).or_insert(0) += 1;
        true
    }

    /// Gives the slot back.
    pub(crate) fn finish(&self, lane: &Lane) {
        let mut s = self.lock();
        if let Some(n) = s.inflight.get_mut(lane) {
            *n -= 1;
            if *n == 0 {
                s.inflight.remove(lane);
            }
        }
        drop(s);
        self.wake.notify_one();
    }

    /// Holds the endpoint off for `wait` (its throttle's spacing).
    pub(crate) fn hold(&self, lane: &Lane, wait: Duration) {
        let now = Instant::now();
        let until = now + wait;
        let mut s = self.lock();
        let held = s.held.entry(lane.clone()).or_insert(until);
        *held = (*held).max(until);
        s.paced.insert(lane.clone(), now);
    }

    /// Asks for the endpoint's other due deliveries to be parked too.
    pub(crate) fn park_rest(&self, lane: &Lane) {
        self.lock().to_park.insert(lane.clone());
        self.wake.notify_one();
    }

    fn take_parks(&self) -> Vec<Lane> {
        let mut s = self.lock();
        let now = Instant::now();
        let wanted: Vec<Lane> = s.to_park.drain().collect();
        let due: Vec<Lane> = wanted
            .into_iter()
            .filter(|l| s.parked_at.get(l).is_none_or(|t| now.duration_since(*t) >= PARK_EVERY))
            .collect();
        for l in &due {
            s.parked_at.insert(l.clone(), now);
        }
        s.parked_at.retain(|_, t| now.duration_since(*t) < PARK_EVERY * 4);
        s.held.retain(|_, t| *t > now);
        s.paced.retain(|_, t| now.duration_since(*t) < PACED_FOR);
        due
    }
}

/// The lane of a claimed delivery.
pub(crate) fn lane_of(c: &Claimed) -> Lane {
    Lane { tenant_id: c.tenant_id.clone(), app_id: c.app_id.clone(), endpoint_id: c.endpoint_id.clone() }
}

/// Parks what was asked to be parked, then serves the lanes round robin, each
/// within its endpoint's room. Runs until the task is dropped.
pub(super) async fn serve_lanes(w: Arc<Worker>, permits: Arc<Semaphore>, done_tx: mpsc::UnboundedSender<Done>) {
    let mut after: Option<Lane> = None;
    loop {
        tokio::select! {
            _ = w.shares.wake.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        for lane in w.shares.take_parks() {
            let parked = db::bounded(w.state().db_budget(), async {
                let conn = db::conn(&w.state().db).await?;
                lanes::park_due(&**conn, &lane.tenant_id, &lane, PARK_MAX).await
            });
            if let Err(e) = parked.await {
                tracing::warn!(endpoint = %lane.endpoint_id, error = %e, "parking an endpoint's due deliveries failed");
            }
        }
        let listed = db::bounded(w.state().db_budget(), async {
            let conn = db::conn(&w.state().db).await?;
            lanes::list(&**conn, after.as_ref(), ROUND).await
        });
        let list = match listed.await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "listing the lanes failed; retrying");
                continue;
            }
        };
        // The next round starts after the last lane of this one, or again at the start.
        after = if list.len() as i64 == ROUND { list.last().cloned() } else { None };
        for lane in list {
            let n = w.shares.lane_room(&lane).min(permits.available_permits()).min(SERVE_MAX);
            if n == 0 {
                continue;
            }
            let served = db::bounded(w.state().db_budget(), async {
                let conn = db::conn(&w.state().db).await?;
                lanes::serve(&**conn, &lane.tenant_id, &lane, n as i64, w.cfg.lease).await
            });
            match served.await {
                Ok(claimed) => {
                    for c in claimed {
                        let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
                        super::start(w.clone(), c, None, permit, done_tx.clone());
                    }
                }
                Err(e) => tracing::warn!(endpoint = %lane.endpoint_id, error = %e, "serving a lane failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookgate_shared::ids::{AppId, EndpointId, TenantId};

    fn lane(n: u8) -> Lane {
        Lane {
            tenant_id: TenantId::generate(),
            app_id: AppId::generate(),
            endpoint_id: EndpointId::from_db(format!("ep_{n}")),
        }
    }

    #[test]
    fn an_endpoint_alone_takes_half_and_every_newcomer_finds_room() {
        let shares = Shares::new(64);
        let (a, b, c) = (lane(1), lane(2), lane(3));
        let taken = (0..100).take_while(|_| shares.try_start(&a)).count();
        assert_eq!(taken, 32, "alone, half of the requests");
        assert!(shares.try_start(&b), "a newcomer finds room");
        assert!(!shares.try_start(&a), "the first is over its share of three ways");
        let b_taken = 1 + (0..100).take_while(|_| shares.try_start(&b)).count();
        assert_eq!(b_taken, 64 / 3);
        assert!(shares.try_start(&c), "and the next one too");
        for _ in 0..taken {
            shares.finish(&a);
        }
        assert!(shares.try_start(&a), "back within its share once its requests end");
    }

    #[test]
    fn a_held_endpoint_gets_no_room_until_its_time() {
        let shares = Shares::new(8);
        let a = lane(1);
        shares.hold(&a, Duration::from_millis(50));
        assert!(!shares.try_start(&a));
        std::thread::sleep(Duration::from_millis(60));
        assert!(shares.try_start(&a));
    }
}
