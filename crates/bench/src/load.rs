//! A closed-loop load generator: N clients, each sending its next request as soon
//! as the last one is answered, for a fixed time; latencies in an HDR histogram.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;

/// What one timed run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Requests answered with the expected status.
    pub ok: u64,
    pub failed: u64,
    pub elapsed: Duration,
    /// Latency in microseconds.
    pub hist: Histogram<u64>,
}

impl Measured {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    pub fn p50_ms(&self) -> f64 {
        self.hist.value_at_quantile(0.5) as f64 / 1000.0
    }

    pub fn p99_ms(&self) -> f64 {
        self.hist.value_at_quantile(0.99) as f64 / 1000.0
    }
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// Runs `clients` loops of `request(client, n) -> ok?` for `duration`.
pub async fn closed_loop<F, Fut>(clients: usize, duration: Duration, request: F) -> Measured
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let request = Arc::new(request);
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed, mut hist) = (0u64, 0u64, histogram());
            let mut n = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                let good = request(client, n).await;
                let _ = hist.record(t.elapsed().as_micros().max(1) as u64);
                if good {
                    ok += 1;
                } else {
                    failed += 1;
                }
                n += 1;
            }
            (ok, failed, hist)
        }));
    }
    let mut total = Measured { ok: 0, failed: 0, elapsed: Duration::ZERO, hist: histogram() };
    for t in tasks {
        let (ok, failed, hist) = t.await.expect("load task");
        total.ok += ok;
        total.failed += failed;
        total.hist.add(hist).expect("same bounds");
    }
    total.elapsed = started.elapsed();
    total
}
