//! Fair shares of a worker's requests between endpoints, and the lanes that hold
//! what an endpoint cannot take now.
//!
//! A tenant may hold at most `C / (t + 1)` of the worker's `C` requests in flight,
//! `t` being the tenants with requests in flight (itself included), so there is
//! always room for one more tenant; within it, each of its `e` endpoints with
//! requests in flight at most an `e`th of that. A delivery claimed for an
//! endpoint at its share, or one its `throttleRate` holds off, is parked in the endpoint's
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
    ids::TenantId,
    store::{
        deliveries::Claimed,
        lanes::{self, Lane},
    },
};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

use super::{Done, Worker};

/// Lanes listed and served per round, and most deliveries taken from one lane at once.
const ROUND: i64 = 256;
const SERVE_MAX: usize = 100;
/// Most due deliveries parked by one statement, most statements in a row while
/// each finds a full batch, and how often one endpoint's are parked.
const PARK_MAX: i64 = 5_000;
const PARK_ROUNDS: usize = 20;
const PARK_EVERY: Duration = Duration::from_millis(500);
/// A round runs at least this often, and on every freed slot or park request.
const TICK: Duration = Duration::from_millis(100);
/// How long an endpoint counts as throttled after its throttle last spaced it.
const PACED_FOR: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    inflight: HashMap<Lane, usize>,
    /// Per tenant: requests in flight, and its endpoints with any.
    tenants: HashMap<TenantId, (usize, usize)>,
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

    /// How many more requests the endpoint may start now: within its tenant's
    /// share and its own share of that, and not while its throttle holds it off.
    fn room_in(&self, s: &State, lane: &Lane) -> usize {
        if s.held.get(lane).is_some_and(|t| *t > Instant::now()) {
            return 0;
        }
        let (tenant_inflight, tenant_endpoints) = s.tenants.get(&lane.tenant_id).copied().unwrap_or((0, 0));
        let tenants = s.tenants.len() + usize::from(tenant_inflight == 0);
        let tenant_share = (self.concurrency / (tenants + 1)).max(1);
        let mine = s.inflight.get(lane).copied().unwrap_or(0);
        let endpoints = tenant_endpoints + usize::from(mine == 0);
        let share = (tenant_share / endpoints).max(1);
        share.saturating_sub(mine).min(tenant_share.saturating_sub(tenant_inflight))
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
        let mine = s.inflight.entry(lane.clone()).or_insert(0);
        *mine += 1;
        let first = *mine == 1;
        let t = s.tenants.entry(lane.tenant_id.clone()).or_insert((0, 0));
        t.0 += 1;
        t.1 += usize::from(first);
        true
    }

    /// Gives the slot back.
    fn finish(&self, lane: &Lane) {
        let mut s = self.lock();
        let Some(n) = s.inflight.get_mut(lane) else { return };
        *n -= 1;
        let last = *n == 0;
        if last {
            s.inflight.remove(lane);
        }
        if let Some(t) = s.tenants.get_mut(&lane.tenant_id) {
            t.0 -= 1;
            t.1 -= usize::from(last);
            if t.0 == 0 {
                s.tenants.remove(&lane.tenant_id);
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

/// A request's slot in its endpoint's share, given back when dropped (a panic
/// in the request included).
pub(super) struct Slot {
    pub(super) worker: Arc<Worker>,
    pub(super) lane: Lane,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.worker.shares.finish(&self.lane);
    }
}

/// The lane of a claimed delivery.
pub(crate) fn lane_of(c: &Claimed) -> Lane {
    Lane { tenant_id: c.tenant_id.clone(), app_id: c.app_id.clone(), endpoint_id: c.endpoint_id.clone() }
}

/// Parks what was asked to be parked, then serves the lanes round robin, each
/// within its endpoint's room. Runs until the task is dropped.
pub(super) async fn serve_lanes(w: Arc<Worker>, permits: Arc<Semaphore>, done_tx: mpsc::UnboundedSender<Done>) {
    // Each round starts after the last lane the previous one served, so no lane
    // is always first when slots are few.
    let mut after: Option<Lane> = None;
    // Whether the last look found lanes: a freed slot wakes the loop only then
    // (the tick looks anyway, for lanes other workers parked).
    let mut busy = false;
    loop {
        let woken = tokio::select! {
            _ = w.shares.wake.notified() => true,
            _ = tokio::time::sleep(TICK) => false,
        };
        let parks = w.shares.take_parks();
        if woken && !busy && parks.is_empty() {
            continue;
        }
        for lane in parks {
            // A long backlog at the head of the due order goes in a few batches, at once.
            for _ in 0..PARK_ROUNDS {
                let parked = db::bounded(w.state().db_budget(), async {
                    let conn = db::conn(&w.state().db).await?;
                    lanes::park_due(&conn, &lane.tenant_id, &lane, PARK_MAX).await
                });
                match parked.await {
                    Ok(n) if n as i64 == PARK_MAX => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(endpoint = %lane.endpoint_id, error = %e, "parking an endpoint's due deliveries failed");
                        break;
                    }
                }
            }
        }
        let listed = db::bounded(w.state().db_budget(), async {
            let conn = db::conn(&w.state().db).await?;
            let mut l = lanes::list(&**conn, after.as_ref(), ROUND).await?;
            // Then round to the start, up to where this round began.
            if (l.len() as i64) < ROUND && after.is_some() {
                let wrapped = lanes::list(&**conn, None, ROUND - l.len() as i64).await?;
                l.extend(wrapped.into_iter().take_while(|x| Some(x) <= after.as_ref()));
            }
            Ok::<_, hookgate_shared::store::StoreError>(l)
        });
        let list = match listed.await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "listing the lanes failed; retrying");
                continue;
            }
        };
        busy = !list.is_empty();
        for lane in list {
            let want = w.shares.lane_room(&lane).min(SERVE_MAX);
            // The slots are taken before the claim, so what is claimed never
            // waits for a slot while its lease runs.
            let Some(mut slots) = reserve(&permits, want) else { continue };
            let served = db::bounded(w.state().db_budget(), async {
                let conn = db::conn(&w.state().db).await?;
                lanes::serve(&conn, &lane.tenant_id, &lane, slots.num_permits() as i64, w.cfg.lease).await
            });
            match served.await {
                Ok(claimed) => {
                    if !claimed.is_empty() {
                        after = Some(lane.clone());
                    }
                    for c in claimed {
                        let permit = slots.split(1).expect("one slot reserved per claimed delivery");
                        super::start(w.clone(), c, None, permit, done_tx.clone());
                    }
                }
                Err(e) => tracing::warn!(endpoint = %lane.endpoint_id, error = %e, "serving a lane failed"),
            }
        }
    }
}

/// Up to `n` free slots of the worker, taken now; `None` if there are none.
pub(super) fn reserve(permits: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let n = n.min(permits.available_permits());
    if n == 0 {
        return None;
    }
    permits.clone().try_acquire_many_owned(n as u32).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookgate_shared::ids::{AppId, EndpointId, TenantId};

    fn lane(n: u8) -> Lane {
        lane_of_tenant(TenantId::generate(), n)
    }

    fn lane_of_tenant(tenant_id: TenantId, n: u8) -> Lane {
        Lane { tenant_id, app_id: AppId::generate(), endpoint_id: EndpointId::from_db(format!("ep_{n}")) }
    }

    fn take(shares: &Shares, l: &Lane) -> usize {
        (0..100).take_while(|_| shares.try_start(l)).count()
    }

    #[test]
    fn a_tenant_alone_takes_half_and_every_newcomer_finds_room() {
        let shares = Shares::new(64);
        let (a, b, c) = (lane(1), lane(2), lane(3));
        let taken = take(&shares, &a);
        assert_eq!(taken, 32, "alone, half of the requests");
        assert!(shares.try_start(&b), "a newcomer finds room");
        assert!(!shares.try_start(&a), "the first is over its share of three ways");
        assert_eq!(1 + take(&shares, &b), 64 / 3);
        assert!(shares.try_start(&c), "and the next one too");
        for _ in 0..taken {
            shares.finish(&a);
        }
        assert!(shares.try_start(&a), "back within its share once its requests end");
    }

    #[test]
    fn a_tenants_endpoints_split_its_share_and_leave_other_tenants_theirs() {
        let shares = Shares::new(64);
        let tenant = TenantId::generate();
        let many: Vec<Lane> = (0..8).map(|n| lane_of_tenant(tenant.clone(), n)).collect();
        let used: usize = many.iter().map(|l| take(&shares, l)).sum();
        assert!(used <= 32, "one tenant's eight endpoints hold at most its half ({used})");
        let other = lane(9);
        assert!(take(&shares, &other) >= 64 / 3, "another tenant gets its share all the same");
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
