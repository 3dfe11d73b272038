//! The sustained rows: ingress admissions and API messages arriving together at a
//! paced rate, each delivered to one endpoint, with a worker running; a ramp of
//! rates finds the highest at which the lag (sent → delivered) stays under 100 ms
//! at p99 and the backlog does not grow.

use std::{sync::Arc, time::Duration};

use crate::{
    bed::{Bed, Tenant},
    cpu::PerUnit,
    pace::paced,
    report::Row,
    requests::{stripe_post, timed_message},
    sink::now_micros,
    Settings,
};

/// The lag a rate must hold to count as sustained.
const LAG_P99_MS: f64 = 100.0;

/// One step of the ramp.
#[derive(Debug, Clone)]
pub struct Step {
    /// Messages per second offered (half by ingress, half by the API).
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Accepted but not yet delivered when the pacing ended.
    pub backlog: u64,
    pub messages: u64,
    pub cpu: PerUnit,
    /// Wall time from the first send until the last delivery.
    pub busy: f64,
    /// Where the lag went: the deliveries over 100 ms (when sent, seconds into
    /// the step, and the worst lag) and what Postgres was busy with meanwhile.
    pub late: String,
}

impl Step {
    fn holds(&self) -> bool {
        // What 100 ms of the rate leaves in flight is not a backlog.
        self.p99_ms < LAG_P99_MS && (self.backlog as f64) <= self.rate * 0.1 + 10.0
    }
}

fn steps() -> u32 {
    std::env::var("BENCH_RAMP_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(12)
}

pub async fn run(
    bed: &Bed,
    tenant: &Arc<Tenant>,
    app: &str,
    in_url: &str,
    p: f64,
    s: Settings,
) -> anyhow::Result<Vec<Row>> {
    bed.truncate()?;
    let sizes_before = bed.meter.retained_bytes().await?;
    let wal_from = bed.meter.lsn().await?;
    let mut made = 0u64;
    let mut worker = bed.start_worker().await;
    let window = (s.duration / 2).max(Duration::from_secs(1));
    let mut rate = (p * 0.02).max(20.0);
    let (mut best, mut first_miss): (Option<Step>, Option<Step>) = (None, None);
    for step in 0..steps() {
        eprintln!("sustained: {rate:.0}/s for {} s", window.as_secs());
        let measured = one_step(bed, &worker, tenant, app, in_url, rate, window, step).await?;
        made += measured.messages;
        if measured.holds() {
            best = Some(measured);
            rate *= 1.3;
        } else {
            eprintln!("sustained: missed at {rate:.0}/s: {}", measured.late);
            first_miss = Some(measured);
            break;
        }
    }
    worker.stop().await;
    let disk = retained(bed, &sizes_before, made).await?;
    // Where its WAL is, to read by record type: `pg_waldump --stats=record -s … -e …`.
    eprintln!("sustained: WAL from {wal_from} to {}", bed.meter.lsn().await?);
    let miss = first_miss
        .map(|m| format!("; at {:.0}/s: p99 {:.0} ms, backlog {}", m.rate, m.p99_ms, m.backlog))
        .unwrap_or_else(|| "; the ramp ended before a miss".into());
    let Some(b) = best else {
        return Ok(vec![
            disk,
            Row {
                name: "sustained: ingress + API, lag p99 < 100 ms".into(),
                bar: Some((">= 0.2 x P".into(), false)),
                note: format!("no rate held{miss}"),
                ..Row::default()
            },
        ]);
    };
    Ok(vec![
        Row {
            name: "sustained: ingress + API, lag p99 < 100 ms".into(),
            rate: b.rate,
            p50_ms: Some(b.p50_ms),
            p99_ms: Some(b.p99_ms),
            ratio: Some((b.rate / p, "P".into())),
            bar: Some((">= 0.2 x P".into(), b.rate / p >= 0.2)),
            cpu: Some(b.cpu),
            note: format!("highest rate held, half ingress, half API{miss}"),
            ..Row::default()
        },
        Row {
            name: "CPU per message end to end (sustained)".into(),
            rate: b.rate,
            bar: Some(("<= 600 us".into(), b.cpu.total_us <= 600.0)),
            cpu: Some(b.cpu),
            note: format!(
                "{:.0} us, Postgres {:.0} us; {:.2} cores busy",
                b.cpu.total_us,
                b.cpu.postgres_us,
                b.cpu.total_us * b.messages as f64 / 1e6 / b.busy
            ),
            ..Row::default()
        },
        Row {
            name: "WAL per message end to end (sustained)".into(),
            rate: b.rate,
            bar: b.cpu.wal.map(|(bytes, _)| ("<= 2500 B".into(), bytes <= 2500.0)),
            cpu: Some(b.cpu),
            note: b.cpu.wal.map(|(bytes, _)| format!("{bytes:.0} bytes of WAL per message")).unwrap_or_default(),
            ..Row::default()
        },
        disk,
    ])
}

/// The disk the sustained row's messages hold once delivered: what the tables
/// that grow per message ([`crate::cpu::RETAINED`]) grew by over the whole ramp,
/// per message made in it; the largest parts in the note.
async fn retained(bed: &Bed, before: &[i64], made: u64) -> anyhow::Result<Row> {
    let after = bed.meter.retained_bytes().await?;
    let per = |i: usize| (after[i] - before[i]).max(0) as f64 / made.max(1) as f64;
    let total: f64 = (0..after.len()).map(per).sum();
    let parts: Vec<String> = crate::cpu::RETAINED
        .iter()
        .enumerate()
        .filter(|(i, _)| per(*i) >= 1.0)
        .map(|(i, name)| format!("{name} {:.0}", per(i)))
        .collect();
    Ok(Row {
        name: "disk per retained message (sustained)".into(),
        note: format!("{total:.0} bytes per message of {made} ({})", parts.join(", ")),
        ..Row::default()
    })
}

#[allow(clippy::too_many_arguments)]
pub async fn one_step(
    bed: &Bed,
    worker: &crate::stack::Hookgate,
    tenant: &Arc<Tenant>,
    app: &str,
    in_url: &str,
    rate: f64,
    window: Duration,
    step: u32,
) -> anyhow::Result<Step> {
    bed.sink.reset_lag();
    let base = bed.sink.count();
    let before = bed.cpu(Some(worker)).await;
    let started = std::time::Instant::now();
    let step_start = now_micros();
    // What Postgres is busy with, every 200 ms while the step runs.
    let watch = async {
        let mut seen = Vec::new();
        while started.elapsed() < window {
            for line in bed.meter.busy().await {
                seen.push((started.elapsed().as_secs_f64(), line));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        seen
    };
    let ingress = {
        let (http, url) = (bed.http.clone(), in_url.to_owned());
        paced(rate / 2.0, window, 2048, move |n| {
            let body = format!(r#"{{"t":{},"id":"evt_s_{step}_{n}","type":"bench.event","data":{{}}}}"#, now_micros());
            let req = stripe_post(&http, &url, body);
            async move { req.send().await.is_ok_and(|r| r.status() == 200) }
        })
    };
    let api = {
        let (http, url, key) = (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app}/msg")), tenant.key.clone());
        paced(rate / 2.0, window, 2048, move |_| {
            let req = timed_message(&http, &url, &key);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
    };
    let ((a, b), seen) = tokio::join!(async { tokio::join!(ingress, api) }, watch);
    let accepted = a.accepted + b.accepted;
    let backlog = accepted.saturating_sub(bed.sink.count() - base);
    // A rate that builds a backlog is already a miss: give it a bounded time to drain.
    let drained = bed.wait_for(base + accepted, Duration::from_secs(60)).await;
    let busy = started.elapsed().as_secs_f64();
    let cpu = before.per(&bed.cpu(Some(worker)).await, accepted);
    let lag = bed.sink.lag.lock().expect("lag lock").clone();
    let mut p99_ms = lag.value_at_quantile(0.99) as f64 / 1000.0;
    if drained.is_err() {
        p99_ms = f64::INFINITY;
    }
    let late = bed.sink.late.lock().expect("late lock").clone();
    let late = match late.iter().map(|(t, _)| *t).min().zip(late.iter().map(|(t, _)| *t).max()) {
        None => String::new(),
        Some((first, last)) => {
            let at = |t: u64| t.saturating_sub(step_start) as f64 / 1e6;
            let worst = late.iter().map(|(_, l)| *l).max().unwrap_or(0) as f64 / 1000.0;
            let during: Vec<String> = seen
                .iter()
                .filter(|(s, _)| *s >= at(first) - 1.0 && *s <= at(last) + 0.5)
                .map(|(s, line)| format!("{s:.1} s {line}"))
                .collect();
            format!(
                "{} deliveries over 100 ms, sent {:.1}-{:.1} s into the step (worst {worst:.0} ms); Postgres meanwhile: {}",
                late.len(),
                at(first),
                at(last),
                if during.is_empty() { "nothing long".to_owned() } else { during.join("; ") }
            )
        }
    };
    Ok(Step {
        late,
        rate: a.rate + b.rate,
        p50_ms: lag.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms,
        backlog,
        messages: accepted,
        cpu,
        busy,
    })
}
