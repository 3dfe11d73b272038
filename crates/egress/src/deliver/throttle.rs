//! Per-endpoint `throttleRate` (deliveries per second) across every instance.
//!
//! A GCRA spacing in Redis: each endpoint has a "next allowed" time; a delivery
//! may go once that time has passed, and moves it on by one interval. Redis's own
//! clock decides, so instances need no clock agreement. With Redis down, each
//! process keeps its own spacing: the limit then holds per process only.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use hookgate_shared::redis::{Redis, Script};

/// Next-allowed time in ms; returns 0 to go now, or the ms to wait.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat > now then return tat - now end
redis.call('SET', KEYS[1], now + interval, 'PX', interval + 1000)
return 0
";

pub struct Throttle {
    redis: Redis,
    script: Script,
    local: Mutex<HashMap<String, Instant>>,
}

/// The spacing between deliveries for a rate, with a small margin so that network
/// jitter cannot squeeze one more into a second.
pub(super) fn interval(rate: i32) -> Duration {
    Duration::from_secs_f64(1.0 / rate.max(1) as f64) + Duration::from_millis(10)
}

impl Throttle {
    pub fn new(redis: Redis) -> Self {
        Throttle { redis, script: Script::new(GCRA), local: Mutex::new(HashMap::new()) }
    }

    /// `None` to send now, or how long to wait before trying again.
    pub async fn check(&self, endpoint_key: &str, rate: i32) -> Option<Duration> {
        let step = interval(rate);
        let key = self.redis.key(&format!("throttle:{endpoint_key}"));
        let script = &self.script;
        let ms = step.as_millis() as u64;
        let answer: Option<u64> =
            self.redis.call(|mut c| async move { script.key(key).arg(ms).invoke_async(&mut c).await }).await;
        match answer {
            Some(0) => None,
            Some(wait) => Some(Duration::from_millis(wait)),
            None => self.check_local(endpoint_key, step),
        }
    }

    fn check_local(&self, endpoint_key: &str, step: Duration) -> Option<Duration> {
        let mut map = self.local.lock().expect("throttle map is never poisoned");
        let now = Instant::now();
        if map.len() >= PRUNE_PAST && !map.contains_key(endpoint_key) {
            // An entry whose time has passed says nothing a missing one would not.
            map.retain(|_, next| *next > now);
        }
        let next = map.entry(endpoint_key.to_owned()).or_insert(now);
        if *next > now {
            return Some(*next - now);
        }
        *next = now + step;
        None
    }
}

/// Past this many endpoints spaced locally, the ones whose time has passed are forgotten.
const PRUNE_PAST: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_local_spacing_forgets_endpoints_whose_time_has_passed() {
        let t = Throttle::new(Redis::disabled());
        for i in 0..PRUNE_PAST {
            assert_eq!(t.check(&format!("ep{i}"), 65_535).await, None);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(t.check("one more", 65_535).await, None);
        assert_eq!(t.local.lock().unwrap().len(), 1, "the elapsed ones went, the new one stays");
        assert!(t.check("one more", 1).await.is_some(), "and still spaces its endpoint");
    }

    #[tokio::test]
    async fn without_redis_the_local_spacing_admits_one_per_interval() {
        let t = Throttle::new(Redis::disabled());
        assert_eq!(t.check("ep", 5).await, None);
        let wait = t.check("ep", 5).await.expect("the second at once must wait");
        assert!(wait > Duration::from_millis(150) && wait <= Duration::from_millis(210), "{wait:?}");
        assert_eq!(t.check("other", 5).await, None, "endpoints are apart");
    }
}
