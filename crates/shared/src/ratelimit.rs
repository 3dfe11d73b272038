//! Per-tenant rate limits across every instance: a GCRA in Redis (one key per
//! tenant and limit, Redis's clock), falling back to a per-process limiter
//! (`governor`) while Redis is away — the limit then holds per instance only.
//!
//! A rate of N per second admits a burst of N at once, then one every 1/N s.

use std::{
    collections::HashMap,
    num::NonZeroU32,
    sync::{Arc, Mutex},
    time::Duration,
};

use governor::{clock::Clock, DefaultDirectRateLimiter, Quota};

use crate::redis::{Redis, Script};

/// Theoretical arrival time in µs; returns 0 to admit, or the µs to wait.
/// ARGV: emission interval µs, burst tolerance µs.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
if tat - now > tolerance then return tat - now - tolerance end
local new = tat + emission
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000) + 1000)
return 0
";

/// Local limiters above this many are dropped and started afresh.
const MAX_LOCAL: usize = 50_000;

pub struct RateLimiter {
    redis: Redis,
    script: Script,
    /// key → (rate it was made for, limiter).
    local: Mutex<HashMap<String, (u32, Arc<DefaultDirectRateLimiter>)>>,
}

impl RateLimiter {
    pub fn new(redis: Redis) -> Self {
        RateLimiter { redis, script: Script::new(GCRA), local: Mutex::new(HashMap::new()) }
    }

    /// `None` to admit one event of `tenant` under `name` at `rate` per second, or
    /// how long to wait before one can be admitted.
    pub async fn check(&self, tenant: &str, name: &str, rate: u64) -> Option<Duration> {
        // Whole microseconds: a million a second is the finest rate kept apart.
        let rate = rate.clamp(1, 1_000_000) as u32;
        let emission = 1_000_000u64 / rate as u64;
        let tolerance = emission * (rate as u64 - 1);
        let key = self.redis.tenant_key(tenant, &format!("rate:{name}"));
        let script = &self.script;
        let answer: Option<u64> = self
            .redis
            .call(|mut c| async move { script.key(key).arg(emission.max(1)).arg(tolerance).invoke_async(&mut c).await })
            .await;
        match answer {
            Some(0) => None,
            Some(wait) => Some(Duration::from_micros(wait)),
            None => self.check_local(format!("{tenant}:{name}"), rate),
        }
    }

    fn check_local(&self, key: String, rate: u32) -> Option<Duration> {
        let limiter = {
            let mut map = self.local.lock().expect("limiter map is never poisoned");
            if map.len() >= MAX_LOCAL && !map.contains_key(&key) {
                map.clear();
            }
            let entry = map.entry(key).or_insert_with(|| (rate, new_limiter(rate)));
            if entry.0 != rate {
                *entry = (rate, new_limiter(rate));
            }
            entry.1.clone()
        };
        match limiter.check() {
            Ok(()) => None,
            Err(not_until) => Some(not_until.wait_time_from(governor::clock::DefaultClock::default().now())),
        }
    }
}

fn new_limiter(rate: u32) -> Arc<DefaultDirectRateLimiter> {
    let rate = NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN);
    Arc::new(governor::RateLimiter::direct(Quota::per_second(rate)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_redis_a_burst_of_the_rate_passes_then_the_next_waits() {
        let l = RateLimiter::new(Redis::disabled());
        for i in 0..5 {
            assert_eq!(l.check("tnt_a", "api", 5).await, None, "request {i} of the burst");
        }
        let wait = l.check("tnt_a", "api", 5).await.expect("the sixth must wait");
        assert!(wait <= Duration::from_millis(200), "{wait:?}");
        assert_eq!(l.check("tnt_b", "api", 5).await, None, "tenants are apart");
        assert_eq!(l.check("tnt_a", "inbound", 5).await, None, "limits are apart");
    }
}
