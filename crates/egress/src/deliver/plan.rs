//! What the next claim asks for: the deliveries commits just made due (hints,
//! claimed by key), then the endpoints whose wake has come (listed), each within
//! its share; and what a claim's answer says about each endpoint afterwards.
//!
//! An endpoint a claim found drained (it gave less than it was asked) is left
//! out of listings until its wake is raised (`deliver::wakes`): its wake is early
//! and would list it again and again. So is an endpoint woken only by a commit
//! whose deliveries the hints took: its wake came with them.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::Instant,
};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    ids::{MessageId, TenantId},
    store::{
        deliveries::Claimed,
        queues::{Hint, Queue, Want},
        wakes::{self, Listed},
        StoreError,
    },
};

use super::shares::{self, Shares, Skips, Throttled};

/// Most endpoints one listing returns.
const LIST: i64 = 512;
/// Most hinted ranges kept per endpoint, and most endpoints with hinted ranges.
const MOST_RANGES: usize = 16;
const MOST_HINTED: usize = 20_000;

/// The worker's view of what is due, between claims.
#[derive(Default)]
pub(super) struct Plan {
    /// Per endpoint, the ranges of message ids commits made due that no claim has
    /// taken all of yet, lowest first. Commits end out of id order (an id is
    /// drawn before its commit), so a hint below the ranges held starts a range
    /// of its own: merged, the range would be scanned again from below.
    hinted: HashMap<Queue, VecDeque<Range>>,
    /// The last listing: endpoints whose wake had come.
    listed: Vec<Listed>,
    /// The endpoints of `listed`, for telling a woken endpoint from a busy one.
    known_due: HashSet<Queue>,
    /// Whether to list before the next claim (a wake-up without hints, a wake
    /// time reached, or the last listing found more than was claimed).
    pub(super) list: bool,
    /// The next wake after the last listing, and those the recorder wrote since.
    pub(super) next_wake: Option<DateTime<Utc>>,
    /// The last listing left out tenants or endpoints for want of room: a request
    /// that ends may let them go.
    pub(super) behind_shares: bool,
}

/// A hinted range: messages `lo` to `hi`, and no earlier than when the worker
/// could have started its oldest (reset while its endpoint has no room: that
/// wait is the endpoint's, not the worker's).
#[derive(Debug, Clone)]
struct Range {
    lo: MessageId,
    hi: MessageId,
    ready: Instant,
}

/// Endpoints left out of listings until their wakes are raised (with when they
/// were found drained), shared with the task that raises them.
pub(super) type Drained = Arc<Mutex<HashMap<Queue, Instant>>>;

/// One claim's wants, by tenant, and what each asked (to read the answer by).
pub(super) struct Asked {
    pub(super) by_tenant: BTreeMap<TenantId, Vec<Want>>,
}

impl Plan {
    pub(super) fn new() -> Self {
        Plan { list: true, ..Plan::default() }
    }

    /// Takes new hints in.
    pub(super) fn hint(&mut self, hints: Vec<Hint>) {
        let now = Instant::now();
        for h in hints {
            if !self.hinted.contains_key(&h.queue) && self.hinted.len() >= MOST_HINTED {
                // The wakes hold what is dropped: the listing finds it.
                self.list = true;
                continue;
            }
            let ranges = self.hinted.entry(h.queue).or_default();
            match ranges.back_mut() {
                Some(last) if h.lo >= last.lo => {
                    if h.hi > last.hi {
                        last.hi = h.hi;
                    }
                }
                _ => {
                    let at = ranges.partition_point(|r| r.lo <= h.lo);
                    ranges.insert(at, Range { lo: h.lo, hi: h.hi, ready: now });
                    if ranges.len() > MOST_RANGES {
                        // The wakes hold what is dropped: the listing finds it.
                        ranges.pop_front();
                        self.list = true;
                    }
                }
            }
        }
    }

    pub(super) fn has_hints(&self) -> bool {
        !self.hinted.is_empty()
    }

    /// Lists the endpoints whose wake has come, leaving out those that cannot
    /// start anything now and those waiting to be raised.
    pub(super) async fn relist(
        &mut self,
        conn: &hookgate_shared::db::Client,
        shares: &Shares,
        drained: &Drained,
    ) -> Result<(), StoreError> {
        let skips = shares.skips();
        self.behind_shares = !skips.is_empty();
        let mut skip = skips.queues;
        skip.extend(drained.lock().expect("drained lock").keys().cloned());
        let (listed, next) = wakes::due(conn, &skips.tenants, &skip, &skips.apps, LIST).await?;
        self.known_due = listed.iter().map(|l| l.queue.clone()).collect();
        self.listed = listed;
        self.next_wake = next.and_then(|d| chrono::Duration::from_std(d).ok()).map(|d| Utc::now() + d);
        self.list = false;
        Ok(())
    }

    /// What to ask for `room` slots, each endpoint within its share: listed
    /// endpoints (due in their wake's order) and endpoints only hinted, in turn,
    /// so neither a stream of new messages nor a backlog holds the other up. An
    /// endpoint both listed and hinted is asked for its due deliveries first
    /// (oldest due first), then for its hinted ones.
    pub(super) fn wants(&self, shares: &Shares, room: usize) -> Asked {
        let front = |q: &Queue| self.hinted.get(q).and_then(|r| r.front());
        let listed: HashSet<&Queue> = self.listed.iter().map(|l| &l.queue).collect();
        let mut only_hinted =
            self.hinted.iter().filter(|(q, _)| !listed.contains(q)).filter_map(|(q, r)| r.front().map(|r| (q, r)));
        let mut offered: Vec<(&Queue, Throttled, Option<&Range>)> = Vec::new();
        let mut listed_in_turn = self.listed.iter();
        loop {
            let l = listed_in_turn.next();
            if let Some(l) = l {
                offered.push((&l.queue, l.throttled, None));
                if let Some(r) = front(&l.queue) {
                    offered.push((&l.queue, l.throttled, Some(r)));
                }
            }
            let h = only_hinted.next();
            if let Some((q, r)) = h {
                // Not known to be throttled: the claim itself asks a throttled one for one.
                offered.push((q, Throttled::No, Some(r)));
            }
            if l.is_none() && h.is_none() {
                break;
            }
        }
        let asked: Vec<(&Queue, Throttled)> = offered.iter().map(|(q, t, _)| (*q, *t)).collect();
        let mut by_tenant: BTreeMap<TenantId, Vec<Want>> = BTreeMap::new();
        for (i, n) in shares.allocate(&asked, room) {
            let (q, _, range) = offered[i];
            let range = range.map(|r| (r.lo.clone(), r.hi.clone()));
            by_tenant.entry(q.tenant_id.clone()).or_default().push(Want {
                app_id: q.app_id.clone(),
                endpoint_id: q.endpoint_id.clone(),
                room: n,
                range,
            });
        }
        Asked { by_tenant }
    }

    /// Reads a claim's answer: hinted endpoints move past what they gave, and are
    /// forgotten once they gave less than asked (their hinted deliveries are all
    /// taken); listed endpoints that gave less than asked are drained. Both kinds
    /// of used-up endpoint go to `drained` unless the listing had them due anyway.
    pub(super) fn claimed(&mut self, asked: &Asked, claimed: &[Claimed], drained: &Drained) {
        let mut got: HashMap<(Queue, bool), (i64, Option<MessageId>)> = HashMap::new();
        for c in claimed {
            let e = got.entry((shares::queue_of(c), c.by_hint)).or_insert((0, None));
            e.0 += 1;
            if e.1.as_ref().is_none_or(|m| c.msg_id > *m) {
                e.1 = Some(c.msg_id.clone());
            }
        }
        let mut used_up = Vec::new();
        let mut short = false;
        for (tenant, wants) in &asked.by_tenant {
            for w in wants {
                let q =
                    Queue { tenant_id: tenant.clone(), app_id: w.app_id.clone(), endpoint_id: w.endpoint_id.clone() };
                let hinted = w.range.is_some();
                let (n, last) = got.remove(&(q.clone(), hinted)).unwrap_or((0, None));
                if n < w.room {
                    short = true;
                    if hinted {
                        let ranges = self.hinted.get_mut(&q);
                        let more = ranges.is_some_and(|r| {
                            r.pop_front();
                            !r.is_empty()
                        });
                        if !more {
                            self.hinted.remove(&q);
                            // Woken by the commit alone: its wake came with these.
                            if !self.known_due.contains(&q) {
                                used_up.push(q);
                            }
                        }
                    } else {
                        self.listed.retain(|l| l.queue != q);
                        self.known_due.remove(&q);
                        used_up.push(q);
                    }
                } else if let (true, Some(last)) = (hinted, last) {
                    if let Some(range) = self.hinted.get_mut(&q).and_then(|r| r.front_mut()) {
                        range.lo = last;
                    }
                }
            }
        }
        // A listing that gave everything it was asked may hold more: list again.
        if !short && !self.listed.is_empty() {
            self.list = true;
        }
        if !used_up.is_empty() {
            let now = Instant::now();
            drained.lock().expect("drained lock").extend(used_up.into_iter().map(|q| (q, now)));
        }
    }

    /// How long the oldest hinted work that could start now has waited for this
    /// worker: hinted endpoints with no room (their tenant's or their own share
    /// taken, or held by their throttle) are waiting for themselves, so their
    /// clocks start again.
    /// Returns since when (the oldest), if any waits.
    pub(super) fn pressure(&mut self, skips: &Skips) -> Option<Instant> {
        let now = Instant::now();
        let now_ms = Utc::now().timestamp_millis().max(0) as u64;
        let mut oldest: Option<Instant> = None;
        for (q, ranges) in &mut self.hinted {
            if skips.covers(q) {
                for r in ranges.iter_mut() {
                    r.ready = now;
                }
            } else if let Some(r) = ranges.front() {
                // The oldest message not yet claimed was made about when `lo` was
                // (claims move `lo` on): a range a steady stream keeps open, and
                // a worker keeps up with, is never old.
                let made = r.lo.millis().map_or(r.ready, |ms| {
                    now.checked_sub(std::time::Duration::from_millis(now_ms.saturating_sub(ms))).unwrap_or(now)
                });
                let since = r.ready.max(made);
                oldest = Some(oldest.map_or(since, |o| o.min(since)));
            }
        }
        oldest
    }

    /// Whether the last listing left endpoints due that the next claim may ask.
    pub(super) fn any_listed(&self) -> bool {
        !self.listed.is_empty()
    }

    /// An earlier wake someone wrote (a retry, a raise that left a wake due).
    pub(super) fn wake_at(&mut self, at: DateTime<Utc>) {
        if at <= Utc::now() {
            self.list = true;
        }
        if self.next_wake.is_none_or(|n| at < n) {
            self.next_wake = Some(at);
        }
    }
}
