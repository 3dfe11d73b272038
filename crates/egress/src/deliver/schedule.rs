//! When a failed delivery is tried next, or whether it has failed for good.

use std::time::Duration;

use rand::Rng;

/// Bounds on a receiver's `Retry-After`: honoured, but neither hammering nor parking.
const RETRY_AFTER_MIN: Duration = Duration::from_secs(1);
const RETRY_AFTER_MAX: Duration = Duration::from_secs(6 * 3600);

/// The next delay after the `attempts_made`-th failed attempt, or `None` when the
/// schedule is exhausted. Jitter of ±20 % spreads retries of many deliveries.
pub fn next_delay(schedule: &[Duration], attempts_made: usize, retry_after: Option<Duration>) -> Option<Duration> {
    let base = *schedule.get(attempts_made.checked_sub(1)?)?;
    if let Some(ra) = retry_after {
        return Some(ra.clamp(RETRY_AFTER_MIN, RETRY_AFTER_MAX));
    }
    let jitter = rand::rng().random_range(0.8..1.2);
    Some(base.mul_f64(jitter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn each_failure_takes_the_next_delay_with_jitter_and_the_schedule_ends() {
        let s = secs(&[5, 300]);
        let d1 = next_delay(&s, 1, None).unwrap();
        assert!(d1 >= Duration::from_secs(4) && d1 <= Duration::from_secs(6), "{d1:?}");
        let d2 = next_delay(&s, 2, None).unwrap();
        assert!(d2 >= Duration::from_secs(240) && d2 <= Duration::from_secs(360), "{d2:?}");
        assert_eq!(next_delay(&s, 3, None), None, "exhausted after the last delay");
        assert_eq!(next_delay(&s, 0, None), None);
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        let s = secs(&[5, 300]);
        assert_eq!(next_delay(&s, 1, Some(Duration::from_secs(30))), Some(Duration::from_secs(30)));
        assert_eq!(next_delay(&s, 1, Some(Duration::ZERO)), Some(Duration::from_secs(1)));
        assert_eq!(next_delay(&s, 1, Some(Duration::from_secs(86400))), Some(Duration::from_secs(6 * 3600)));
        assert_eq!(next_delay(&s, 2, Some(Duration::from_secs(30))), Some(Duration::from_secs(30)));
        assert_eq!(next_delay(&s, 3, Some(Duration::from_secs(30))), None, "never past the schedule");
    }
}
