//! An open-loop (paced) load generator: requests at a fixed rate whatever the
//! answers take, so a slow gateway shows up as lag rather than as a lower rate.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::sync::Semaphore;

/// What a paced run sent.
#[derive(Debug, Clone, Copy)]
pub struct Paced {
    /// Requests answered with the expected status.
    pub accepted: u64,
    pub sent: u64,
    /// Requests sent per second, as achieved.
    pub rate: f64,
}

/// Sends `request(n)` at `rate` per second for `duration`, with at most
/// `in_flight` outstanding (beyond that the generator itself falls behind).
pub async fn paced<F, Fut>(rate: f64, duration: Duration, in_flight: usize, request: F) -> Paced
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let total = (rate * duration.as_secs_f64()).max(1.0) as u64;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.001)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let room = Arc::new(Semaphore::new(in_flight));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for n in 0..total {
        tick.tick().await;
        let permit = room.clone().acquire_owned().await.expect("the semaphore is never closed");
        let fut = request(n);
        tasks.push(tokio::spawn(async move {
            let ok = fut.await;
            drop(permit);
            ok
        }));
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    let mut accepted = 0;
    for t in tasks {
        accepted += t.await.unwrap_or(false) as u64;
    }
    Paced { accepted, sent: total, rate }
}
