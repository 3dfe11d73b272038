//! Fair shares of a worker's requests between tenants and their endpoints.
//!
//! A tenant may hold at most `(C - R) / t` of the worker's `C` requests in flight,
//! `t` being the tenants with requests in flight (itself included) and `R` an
//! eighth of `C` kept for tenants with none, so a newcomer always finds a free
//! slot at once; within it, each of its `e` endpoints with requests in flight at
//! most an `e`th of that. The claim asks each endpoint's
//! queue for no more than its room (`allocate`), and an endpoint with no room, or
//! held off by its throttle, is not asked at all: its waiting deliveries are
//! neither read nor rewritten until it has room again.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

pub(crate) use hookgate_shared::store::wakes::Throttled;
use hookgate_shared::{
    ids::{AppId, TenantId},
    store::{deliveries::Claimed, queues::Queue},
};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::Worker;

#[derive(Default, Clone)]
struct State {
    inflight: HashMap<Queue, usize>,
    /// Per tenant: requests in flight, and its endpoints with any.
    tenants: HashMap<TenantId, (usize, usize)>,
    /// Not before this instant: the endpoint's throttle spacing.
    held: HashMap<Queue, Instant>,
    /// Not before this instant: the application's throttle spacing, shared by
    /// all its endpoints (so they are not each asked for one, then written back).
    held_apps: HashMap<(TenantId, AppId), Instant>,
}

impl State {
    fn start(&mut self, q: &Queue, n: usize) {
        let mine = self.inflight.entry(q.clone()).or_insert(0);
        let first = *mine == 0;
        *mine += n;
        let t = self.tenants.entry(q.tenant_id.clone()).or_insert((0, 0));
        t.0 += n;
        t.1 += usize::from(first);
    }
}

/// What cannot start anything now: tenants at their share, endpoints at theirs
/// or held by their throttle, applications held by theirs.
#[derive(Debug, Default)]
pub(crate) struct Skips {
    pub(crate) tenants: HashSet<TenantId>,
    pub(crate) queues: HashSet<Queue>,
    pub(crate) apps: HashSet<(TenantId, AppId)>,
}

impl Skips {
    pub(crate) fn covers(&self, q: &Queue) -> bool {
        self.tenants.contains(&q.tenant_id)
            || self.queues.contains(q)
            || self.apps.contains(&(q.tenant_id.clone(), q.app_id.clone()))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tenants.is_empty() && self.queues.is_empty() && self.apps.is_empty()
    }
}

/// One worker's view of the endpoints it sends to.
pub(crate) struct Shares {
    concurrency: usize,
    state: Mutex<State>,
    /// Notified when a request ends: an endpoint may have room again.
    pub(super) freed: Notify,
}

impl Shares {
    pub(crate) fn new(concurrency: usize) -> Self {
        Shares { concurrency, state: Mutex::new(State::default()), freed: Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("the shares lock is never poisoned")
    }

    /// How many more requests the endpoint may start now: within its tenant's
    /// share and its own share of that, and not while its throttle holds it off.
    fn tenant_share(&self, s: &State, tenant: &TenantId) -> usize {
        let tenant_inflight = s.tenants.get(tenant).map_or(0, |t| t.0);
        let tenants = s.tenants.len() + usize::from(tenant_inflight == 0);
        let reserve = (self.concurrency / 8).max(1);
        (self.concurrency.saturating_sub(reserve) / tenants).max(1)
    }

    /// How many more requests the tenant may start now.
    fn tenant_room(&self, s: &State, tenant: &TenantId) -> usize {
        let inflight = s.tenants.get(tenant).map_or(0, |t| t.0);
        self.tenant_share(s, tenant).saturating_sub(inflight)
    }

    fn room_in(&self, s: &State, q: &Queue) -> usize {
        self.room_among(s, q, 0)
    }

    /// [`room_in`](Self::room_in), the tenant's share split among at least
    /// `among` endpoints (those of it offered to one allocation): the first of
    /// them does not take its tenant's whole share.
    fn room_among(&self, s: &State, q: &Queue, among: usize) -> usize {
        let now = Instant::now();
        if s.held.get(q).is_some_and(|t| *t > now) {
            return 0;
        }
        if s.held_apps.get(&(q.tenant_id.clone(), q.app_id.clone())).is_some_and(|t| *t > now) {
            return 0;
        }
        let (tenant_inflight, tenant_endpoints) = s.tenants.get(&q.tenant_id).copied().unwrap_or((0, 0));
        let tenant_share = self.tenant_share(s, &q.tenant_id);
        let mine = s.inflight.get(q).copied().unwrap_or(0);
        let endpoints = (tenant_endpoints + usize::from(mine == 0)).max(among);
        let share = (tenant_share / endpoints).max(1);
        share.saturating_sub(mine).min(tenant_share.saturating_sub(tenant_inflight))
    }

    /// What to ask of each queue offered (with whether it is throttled), in
    /// order, for `room` free slots: each no more than it may start now, as if
    /// the ones before it had started theirs. Returns the offered queues' indices
    /// with their counts; queues with no room are left out. A throttled one is
    /// asked for one: its throttle lets one through per slot, so it is asked
    /// once per allocation even when it is offered twice (its due deliveries and
    /// a hinted range): a second would be claimed only to be written back.
    pub(crate) fn allocate(&self, queues: &[(&Queue, Throttled)], room: usize) -> Vec<(usize, i64)> {
        let mut s = self.lock().clone();
        let mut left = room;
        let mut wants = Vec::new();
        // A throttled endpoint is asked once per allocation, and one endpoint of an
        // application that is throttled as a whole (its throttle lets one of all
        // its endpoints through); only those asked count.
        let mut throttled_asked: HashSet<(&TenantId, &AppId)> = HashSet::new();
        let mut offered: HashMap<&TenantId, HashSet<&Queue>> = HashMap::new();
        for (q, _) in queues {
            offered.entry(&q.tenant_id).or_default().insert(*q);
        }
        let mut endpoint_asked: HashSet<&Queue> = HashSet::new();
        for (i, (q, throttled)) in queues.iter().enumerate() {
            if left == 0 {
                break;
            }
            let app = (&q.tenant_id, &q.app_id);
            let asked = match throttled {
                Throttled::No => false,
                Throttled::Endpoint => endpoint_asked.contains(*q),
                Throttled::App => throttled_asked.contains(&app),
            };
            if asked {
                continue;
            }
            let among = offered.get(&q.tenant_id).map_or(0, HashSet::len);
            let room = self.room_among(&s, q, among);
            let n = if *throttled == Throttled::No { room } else { room.min(1) }.min(left);
            if n > 0 {
                match throttled {
                    Throttled::No => {}
                    Throttled::Endpoint => {
                        endpoint_asked.insert(*q);
                    }
                    Throttled::App => {
                        throttled_asked.insert(app);
                    }
                }
                s.start(q, n);
                left -= n;
                wants.push((i, n as i64));
            }
        }
        wants
    }

    /// What a listing should leave out: the tenants at their share, the
    /// endpoints at theirs or held by their throttle, and the applications held
    /// by theirs (none of them may start anything now).
    pub(crate) fn skips(&self) -> Skips {
        let s = self.lock();
        let now = Instant::now();
        let tenants = s.tenants.keys().filter(|t| self.tenant_room(&s, t) == 0).cloned().collect();
        let mut queues: HashSet<Queue> = s.inflight.keys().filter(|q| self.room_in(&s, q) == 0).cloned().collect();
        queues.extend(s.held.iter().filter(|(_, t)| **t > now).map(|(q, _)| q.clone()));
        let apps = s.held_apps.iter().filter(|(_, t)| **t > now).map(|(a, _)| a.clone()).collect();
        Skips { tenants, queues, apps }
    }

    /// Counts a claimed delivery's request as started; the slot gives it back.
    pub(super) fn start(&self, q: &Queue) {
        self.lock().start(q, 1);
    }

    /// The earliest instant a held endpoint or application may go again, if any is held.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        let now = Instant::now();
        let s = self.lock();
        s.held.values().chain(s.held_apps.values()).filter(|t| **t > now).min().copied()
    }

    /// Gives the slot back.
    fn finish(&self, q: &Queue) {
        let mut s = self.lock();
        let Some(n) = s.inflight.get_mut(q) else { return };
        *n -= 1;
        let last = *n == 0;
        if last {
            s.inflight.remove(q);
        }
        if let Some(t) = s.tenants.get_mut(&q.tenant_id) {
            t.0 -= 1;
            t.1 -= usize::from(last);
            if t.0 == 0 {
                s.tenants.remove(&q.tenant_id);
            }
        }
        drop(s);
        self.freed.notify_one();
    }

    /// Holds the endpoint off for `wait` (its throttle's spacing). Holds that
    /// ran out are forgotten here, where the map grows, so it holds only the
    /// endpoints held now.
    pub(crate) fn hold(&self, q: &Queue, wait: Duration) {
        hold_in(&mut self.lock().held, q.clone(), wait);
    }

    /// Holds every endpoint of the queue's application off for `wait` (the
    /// application's throttle spacing).
    pub(crate) fn hold_app(&self, q: &Queue, wait: Duration) {
        hold_in(&mut self.lock().held_apps, (q.tenant_id.clone(), q.app_id.clone()), wait);
    }
}

/// Holds `key` off for `wait` (never shortening a hold), forgetting the holds
/// that ran out.
fn hold_in<K: std::hash::Hash + Eq>(held: &mut HashMap<K, Instant>, key: K, wait: Duration) {
    let now = Instant::now();
    let until = now + wait;
    held.retain(|_, t| *t > now);
    let at = held.entry(key).or_insert(until);
    *at = (*at).max(until);
}

/// A request's slot in its endpoint's share, given back when dropped (a panic
/// in the request included).
pub(super) struct Slot {
    pub(super) worker: Arc<Worker>,
    pub(super) queue: Queue,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.worker.shares.finish(&self.queue);
    }
}

/// The queue of a claimed delivery.
pub(crate) fn queue_of(c: &Claimed) -> Queue {
    Queue { tenant_id: c.tenant_id.clone(), app_id: c.app_id.clone(), endpoint_id: c.endpoint_id.clone() }
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

    fn lane(n: u8) -> Queue {
        lane_of_tenant(TenantId::generate(), n)
    }

    fn lane_of_tenant(tenant_id: TenantId, n: u8) -> Queue {
        Queue { tenant_id, app_id: AppId::generate(), endpoint_id: EndpointId::from_db(format!("ep_{n}")) }
    }

    /// Starts as many as the endpoint is given, one claim at a time.
    fn take(shares: &Shares, l: &Queue) -> usize {
        (0..100).take_while(|_| try_start(shares, l)).count()
    }

    fn try_start(shares: &Shares, l: &Queue) -> bool {
        let given = shares.allocate(&[(l, Throttled::No)], 1);
        for _ in 0..given.first().map_or(0, |(_, n)| *n) {
            shares.start(l);
        }
        !given.is_empty()
    }

    #[test]
    fn a_tenant_alone_takes_all_but_the_reserve_and_every_newcomer_finds_room() {
        let shares = Shares::new(64);
        let (a, b, c) = (lane(1), lane(2), lane(3));
        let taken = take(&shares, &a);
        assert_eq!(taken, 56, "alone, all but the eighth kept for newcomers");
        assert!(try_start(&shares, &b), "a newcomer finds room");
        assert!(!try_start(&shares, &a), "the first is over its share of two ways");
        assert_eq!(1 + take(&shares, &b), 56 / 2);
        assert!(try_start(&shares, &c), "and the next one too");
        for _ in 0..taken {
            shares.finish(&a);
        }
        assert!(try_start(&shares, &a), "back within its share once its requests end");
    }

    #[test]
    fn a_tenants_endpoints_split_its_share_and_leave_other_tenants_theirs() {
        let shares = Shares::new(64);
        let tenant = TenantId::generate();
        let many: Vec<Queue> = (0..8).map(|n| lane_of_tenant(tenant.clone(), n)).collect();
        let used: usize = many.iter().map(|l| take(&shares, l)).sum();
        assert!(used <= 56, "one tenant's eight endpoints hold at most its share ({used})");
        let other = lane(9);
        assert!(take(&shares, &other) >= 56 / 2, "another tenant gets its share all the same");
    }

    #[test]
    fn one_claim_asks_no_queue_for_more_than_its_room_and_leaves_out_a_full_one() {
        let shares = Shares::new(64);
        let (a, b) = (lane(1), lane(2));
        assert_eq!(take(&shares, &a), 56);
        let wants = shares.allocate(&[(&a, Throttled::No), (&b, Throttled::No)], 64);
        assert_eq!(wants.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1], "the full endpoint is not asked");
        assert_eq!(wants[0].1, 56 / 2, "the newcomer is asked for its share");
        // Two endpoints of one new tenant in one claim: its share between them, not each the whole.
        let shares = Shares::new(64);
        let t = TenantId::generate();
        let (c, d) = (lane_of_tenant(t.clone(), 3), lane_of_tenant(t, 4));
        let wants = shares.allocate(&[(&c, Throttled::No), (&d, Throttled::No)], 64);
        let asked: i64 = wants.iter().map(|(_, n)| n).sum();
        assert_eq!(asked, 56, "{wants:?}");
        assert_eq!(wants, vec![(0, 28), (1, 28)], "the first endpoint offered does not take the whole share");
        assert!(shares.allocate(&[(&lane(5), Throttled::No)], 0).is_empty(), "no free slot, nothing asked");
    }

    #[test]
    fn a_throttled_endpoint_is_asked_for_one_and_a_held_one_for_none() {
        let shares = Shares::new(64);
        let (a, b) = (lane(1), lane(2));
        let wants = shares.allocate(&[(&a, Throttled::Endpoint), (&b, Throttled::No)], 64);
        assert_eq!(wants[0], (0, 1), "one of the throttled endpoint, the rest left for others");
        assert_eq!(wants[1].1, 56 / 2, "the other tenant is asked for its share: {wants:?}");
        // Offered twice in one allocation (its due deliveries, then a hinted range): asked once.
        let twice = shares.allocate(&[(&a, Throttled::Endpoint), (&a, Throttled::Endpoint)], 64);
        assert_eq!(twice, vec![(0, 1)], "a throttled endpoint offered twice is asked for one in all");
        // Two throttled endpoints of one application: one of them (the throttle may be the application's).
        let sibling = Queue { endpoint_id: EndpointId::generate(), ..a.clone() };
        let siblings = shares.allocate(&[(&a, Throttled::App), (&sibling, Throttled::App)], 64);
        assert_eq!(siblings, vec![(0, 1)], "one endpoint of a throttled application per allocation");
        let own = shares.allocate(&[(&a, Throttled::Endpoint), (&sibling, Throttled::Endpoint)], 64);
        assert_eq!(own, vec![(0, 1), (1, 1)], "endpoints throttled each on its own are each asked for one");
        shares.hold_app(&sibling, Duration::from_secs(60));
        assert!(
            shares.allocate(&[(&a, Throttled::Endpoint), (&sibling, Throttled::No)], 64).is_empty(),
            "an application held: none of it"
        );
        assert!(shares.skips().covers(&a), "nor is it listed, nor its waiting counted as pressure");
        shares.hold(&a, Duration::from_secs(60));
        assert!(shares.allocate(&[(&a, Throttled::Endpoint)], 64).is_empty(), "held: not asked");
        assert!(shares.skips().queues.contains(&a), "a held endpoint is left out of listings");
    }

    #[test]
    fn a_held_endpoint_gets_no_room_until_its_time() {
        let shares = Shares::new(8);
        let a = lane(1);
        shares.hold(&a, Duration::from_millis(50));
        assert!(!try_start(&shares, &a));
        std::thread::sleep(Duration::from_millis(60));
        assert!(try_start(&shares, &a));
    }
}
