//! The delivery engine's rows: `backoff` (a newer tenant's lag behind thousands
//! of older tenants' endpoints waiting on retries) and `burst` (end-to-end
//! deliveries per second while a closed-loop burst creates messages, counted
//! until the last is delivered).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::{stream, StreamExt};
use serde_json::json;

use crate::{
    bed::{Bed, Tenant},
    load::closed_loop,
    pace::paced,
    report::Row,
    requests::timed_message,
    stack, Settings,
};

/// Endpoints in backoff ahead of the newer tenant (the 5,000), as an
/// agency has them: tenants of applications of at most 100 endpoints.
const BACKOFF_ENDPOINTS: usize = 5_000;
const PER_APP: usize = 100;
const APPS_PER_TENANT: usize = 5;
/// The newer tenant's rate.
const NEWER_RATE: f64 = 200.0;

pub async fn backoff(bed: &Bed, s: Settings) -> anyhow::Result<Row> {
    bed.truncate()?;
    // A worker whose first retry comes after an hour: the older tenants'
    // deliveries all wait on it while the newer tenant is measured.
    let mut env = bed.env.clone();
    env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "3600".into());
    let mut worker = stack::start("worker", &env).await;
    let apps = BACKOFF_ENDPOINTS / PER_APP;
    eprintln!("backoff: {BACKOFF_ENDPOINTS} endpoints of older tenants, failing");
    let mut older: Vec<(Arc<Tenant>, String)> = Vec::new();
    for i in 0..apps / APPS_PER_TENANT {
        let t = bed.tenant(&format!("older-{i}")).await?;
        for _ in 0..APPS_PER_TENANT {
            let app = t.post("/api/v1/app", json!({"name": "customers"})).await?["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            older.push((t.clone(), app));
        }
    }
    let fail = format!("{}/fail", bed.sink.url);
    let creations = older.iter().flat_map(|(t, app)| {
        let fail = fail.clone();
        (0..PER_APP).map(move |i| {
            let (t, app, url) = (t.clone(), app.clone(), format!("{fail}/{i}"));
            async move { t.post(&format!("/api/v1/app/{app}/endpoint"), json!({"url": url})).await.map(|_| ()) }
        })
    });
    let made: Vec<anyhow::Result<()>> = stream::iter(creations).buffer_unordered(32).collect().await;
    made.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let before = bed.sink.failed();
    for (t, app) in &older {
        t.post(&format!("/api/v1/app/{app}/msg"), json!({"eventType": "order.created", "payload": {"k": 1}})).await?;
    }
    // Every one attempted, failed and put back to wait an hour.
    let started = Instant::now();
    while bed.sink.failed() < before + BACKOFF_ENDPOINTS as u64 {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(300), "older tenants' deliveries not all attempted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let newer = bed.tenant("newer").await?;
    let app = newer.app_to("newer", &format!("{}/newer", bed.sink.url), None).await?;
    bed.sink.reset_lag();
    let base = bed.sink.count();
    let sent = {
        let (http, url, key) = (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app}/msg")), newer.key.clone());
        paced(NEWER_RATE, s.duration, 512, move |_| {
            let req = timed_message(&http, &url, &key);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await
    };
    let drained = bed.wait_for(base + sent.accepted, Duration::from_secs(30)).await;
    let lag = bed.sink.lag.lock().expect("lag lock").clone();
    let (p50, mut p99) = (lag.value_at_quantile(0.5) as f64 / 1000.0, lag.value_at_quantile(0.99) as f64 / 1000.0);
    if drained.is_err() {
        p99 = f64::INFINITY;
    }
    let retried = bed.sink.failed() - before - BACKOFF_ENDPOINTS as u64;
    worker.stop().await;
    Ok(Row {
        name: format!("backoff: a newer tenant behind {BACKOFF_ENDPOINTS} endpoints in backoff"),
        rate: sent.rate,
        p50_ms: Some(p50),
        p99_ms: Some(p99),
        bar: Some(("p99 < 100 ms".into(), p99 < 100.0)),
        note: format!("newer tenant at {NEWER_RATE:.0}/s; {retried} older deliveries tried again meanwhile"),
        ..Row::default()
    })
}

/// A closed-loop burst of creation with a worker running: how many messages per
/// second go from request to delivery, counted until the last is delivered.
pub async fn burst(bed: &Bed, tenant: &Arc<Tenant>, app: &str, p: f64, s: Settings) -> anyhow::Result<Row> {
    bed.truncate()?;
    let mut worker = bed.start_worker().await;
    eprintln!("burst: closed-loop creation with a worker running");
    bed.sink.reset_lag();
    let base = bed.sink.count();
    let before = bed.cpu(Some(&worker)).await;
    let started = Instant::now();
    let created = {
        let (http, url, key) = (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app}/msg")), tenant.key.clone());
        closed_loop(s.concurrency, s.duration, move |_, _| {
            let req = timed_message(&http, &url, &key);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await
    };
    let created_in = started.elapsed();
    bed.wait_for(base + created.ok, Duration::from_secs(600)).await?;
    let took = started.elapsed();
    let cpu = before.per(&bed.cpu(Some(&worker)).await, created.ok);
    worker.stop().await;
    let rate = created.ok as f64 / took.as_secs_f64();
    let lag = bed.sink.lag.lock().expect("lag lock").clone();
    let (p50, p99) = (lag.value_at_quantile(0.5) as f64 / 1000.0, lag.value_at_quantile(0.99) as f64 / 1000.0);
    Ok(Row {
        name: "burst: created and delivered, end to end".into(),
        concurrency: s.concurrency,
        rate,
        p50_ms: Some(p50),
        p99_ms: Some(p99),
        ratio: Some((rate / p, "P".into())),
        bar: Some((">= 0.25 x P".into(), rate / p >= 0.25)),
        cpu: Some(cpu),
        note: format!(
            "{} created in {:.1} s ({:.0}/s), the last delivered {:.1} s after the first request",
            created.ok,
            created_in.as_secs_f64(),
            created.ok as f64 / created_in.as_secs_f64(),
            took.as_secs_f64()
        ),
    })
}
