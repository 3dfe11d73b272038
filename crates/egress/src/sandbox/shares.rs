//! Each tenant's share of a sandbox pool, and the rest given to code that keeps
//! running away: one tenant's transformations cannot take every sandbox.
//!
//! A tenant holds at most `each` of a pool's slots at once; its other runs wait
//! behind its own, not in front of other tenants'. Runs the parent had to kill
//! at the wall-clock limit [`STRIKES`] times in [`STRIKE_WINDOW`] rest for a
//! while (doubling each time one is killed again, to [`MOST_REST`]): each such
//! run costs a second of a slot and a new process. They are counted by what
//! ran them, not by their code (which a tenant can change by a character): an
//! endpoint's deliveries, or a tenant's tries and checks in the API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Kills at the wall-clock limit after which code rests.
pub const STRIKES: u32 = 3;
/// How long a kill counts against its code.
pub const STRIKE_WINDOW: Duration = Duration::from_secs(600);
/// The first rest, doubled for each kill past [`STRIKES`].
const FIRST_REST: Duration = Duration::from_secs(30);
/// The longest rest.
pub const MOST_REST: Duration = Duration::from_secs(600);
/// Codes whose kills are remembered; past it the oldest records are dropped.
const MOST_REMEMBERED: usize = 10_000;

/// The tenants' shares of one pool.
pub struct Shares {
    each: usize,
    held: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A tenant's place in its share; gives it back when dropped.
pub struct Place {
    permit: Option<OwnedSemaphorePermit>,
    tenant: String,
    share: Arc<Semaphore>,
    shares: Arc<Shares>,
}

impl Shares {
    pub fn new(each: usize) -> Arc<Self> {
        Arc::new(Shares { each: each.max(1), held: Mutex::new(HashMap::new()) })
    }

    /// Waits for a place in `tenant`'s share, at most `wait`.
    pub async fn enter(self: &Arc<Self>, tenant: &str, wait: Duration) -> Option<Place> {
        let share = {
            let mut held = self.held.lock().expect("sandbox shares");
            held.entry(tenant.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.each))).clone()
        };
        // Made before the wait, so a share abandoned by a timed-out wait is still forgotten.
        let mut place = Place { permit: None, tenant: tenant.to_owned(), share, shares: self.clone() };
        let permit = tokio::time::timeout(wait, place.share.clone().acquire_owned()).await.ok()?.ok()?;
        place.permit = Some(permit);
        Some(place)
    }

    /// Tenants with a share in use or waited for.
    #[cfg(test)]
    pub fn tenants(&self) -> usize {
        self.held.lock().expect("sandbox shares").len()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        drop(self.permit.take());
        // Forgotten once nobody holds or waits for it: every holder and waiter
        // cloned it under this lock, so the count cannot grow behind our back.
        let mut held = self.shares.held.lock().expect("sandbox shares");
        if Arc::strong_count(&self.share) == 2 && held.get(&self.tenant).is_some_and(|s| Arc::ptr_eq(s, &self.share)) {
            held.remove(&self.tenant);
        }
    }
}

/// Kills at the wall-clock limit, by tenant and what ran the code (an endpoint,
/// or `""` for the tenant's tries and checks).
#[derive(Default)]
pub struct Strikes {
    kills: Mutex<HashMap<(String, String), Record>>,
}

struct Record {
    /// When each kill in the window happened.
    at: Vec<Instant>,
    /// No run before this.
    resting_until: Option<Instant>,
}

impl Strikes {
    /// How long `tenant`'s runs for `what` still rest, if they do.
    pub fn resting(&self, tenant: &str, what: &str) -> Option<Duration> {
        let kills = self.kills.lock().expect("sandbox strikes");
        let until = kills.get(&(tenant.to_owned(), what.to_owned()))?.resting_until?;
        until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
    }

    /// Counts a kill of a run of `tenant`'s for `what`; past [`STRIKES`] in the window, they rest.
    pub fn killed(&self, tenant: &str, what: &str) {
        let now = Instant::now();
        let mut kills = self.kills.lock().expect("sandbox strikes");
        if kills.len() >= MOST_REMEMBERED {
            kills.retain(|_, r| r.at.last().is_some_and(|t| now.duration_since(*t) < STRIKE_WINDOW));
            if kills.len() >= MOST_REMEMBERED {
                kills.clear();
            }
        }
        let key = (tenant.to_owned(), what.to_owned());
        let record = kills.entry(key).or_insert(Record { at: Vec::new(), resting_until: None });
        record.at.retain(|t| now.duration_since(*t) < STRIKE_WINDOW);
        record.at.push(now);
        let n = record.at.len() as u32;
        if n >= STRIKES {
            let rest = FIRST_REST.saturating_mul(1 << (n - STRIKES).min(10)).min(MOST_REST);
            record.resting_until = Some(now + rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tenant_waits_behind_its_own_runs_while_another_gets_a_place_at_once() {
        let shares = Shares::new(1);
        let first = shares.enter("a", Duration::from_millis(10)).await.expect("a's first run gets a place");
        assert!(shares.enter("a", Duration::from_millis(50)).await.is_none(), "a's second run waits its turn");
        let other = shares.enter("b", Duration::from_millis(10)).await;
        assert!(other.is_some(), "b is not behind a");
        drop((first, other));
        assert_eq!(shares.tenants(), 0, "shares nobody holds are forgotten");
        assert!(shares.enter("a", Duration::from_millis(10)).await.is_some());
    }

    #[test]
    fn an_endpoint_killed_three_times_rests_and_each_tenants_endpoints_are_their_own() {
        let strikes = Strikes::default();
        for _ in 0..STRIKES - 1 {
            strikes.killed("a", "ep_1");
        }
        assert_eq!(strikes.resting("a", "ep_1"), None, "two kills are not yet a pattern");
        strikes.killed("a", "ep_1");
        let rest = strikes.resting("a", "ep_1").expect("the third kill rests it");
        assert!(rest > Duration::from_secs(25) && rest <= FIRST_REST, "{rest:?}");
        assert_eq!(strikes.resting("b", "ep_1"), None, "another tenant's runs go on");
        assert_eq!(strikes.resting("a", "ep_2"), None, "the tenant's other endpoints go on");
        strikes.killed("a", "ep_1");
        assert!(strikes.resting("a", "ep_1").unwrap() > FIRST_REST, "a fourth kill rests it longer");
    }
}
