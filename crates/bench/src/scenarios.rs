//! The scenarios of `make bench`, each against its baseline measured in this run.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::{
    load::{closed_loop, Measured},
    pgbench,
    report::Row,
    sink::{now_micros, Sink},
    stack::{self, Stack, ADMIN_TOKEN},
    Settings,
};

const STRIPE_SECRET: &str = "whsec_bench";

fn stripe_sig(body: &[u8]) -> String {
    let ts = chrono::Utc::now().timestamp();
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(STRIPE_SECRET.as_bytes()).unwrap();
    m.update(ts.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    format!("t={ts},v1={}", hex::encode(m.finalize().into_bytes()))
}

fn row(name: &str, c: usize, m: &Measured, ratio: Option<(f64, &str)>, bar: Option<(f64, f64)>, note: &str) -> Row {
    Row {
        name: name.into(),
        concurrency: c,
        rate: m.rate(),
        p50_ms: Some(m.p50_ms()),
        p99_ms: Some(m.p99_ms()),
        ratio: ratio.map(|(x, b)| (x, b.to_owned())),
        bar: bar.map(|(need, got)| (format!(">= {need:.1} x"), got >= need)),
        note: note.into(),
    }
}

struct Tenant {
    http: reqwest::Client,
    api: String,
    key: String,
}

impl Tenant {
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let res = self.http.post(format!("{}{path}", self.api)).bearer_auth(&self.key).json(&body).send().await?;
        anyhow::ensure!(res.status().is_success(), "POST {path}: {}", res.status());
        Ok(res.json().await?)
    }
}

async fn wait_for(sink: &Sink, target: u64, timeout: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while sink.count() < target {
        anyhow::ensure!(started.elapsed() < timeout, "sink got {} of {target}", sink.count());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(started.elapsed())
}

/// Publishes `n` messages to `app` as fast as `clients` allow.
async fn publish(t: &Arc<Tenant>, app: &str, n: usize, clients: usize) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (t, next, app) = (t.clone(), next.clone(), app.to_owned());
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                let _ =
                    t.post(&format!("/api/v1/app/{app}/msg"), json!({"eventType": "bench", "payload": {"k": 1}})).await;
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

pub async fn run_all(s: Settings) -> anyhow::Result<Vec<Row>> {
    let stack = Stack::up("bench")?;
    let result = run(&stack, s).await;
    stack.down();
    result
}

async fn run(stack: &Stack, s: Settings) -> anyhow::Result<Vec<Row>> {
    let c = s.concurrency;
    let master_key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let env = stack::env(stack, &master_key);
    stack::migrate(&env)?;
    let mut rows = Vec::new();

    eprintln!("baseline P: pgbench, {c} clients");
    let p = pgbench::run(&stack.database_url, c, s.duration.as_secs())?;
    rows.push(Row {
        name: "P: pgbench INSERT ON CONFLICT DO NOTHING".into(),
        concurrency: c,
        rate: p,
        p50_ms: None,
        p99_ms: None,
        ratio: None,
        bar: None,
        note: "the database's commit limit for one admitted key".into(),
    });

    let sink = Sink::start().await?;
    let http = reqwest::Client::builder().pool_max_idle_per_host(1024).build()?;
    eprintln!("baseline H: straight to the sink");
    let h = {
        let (http, url) = (http.clone(), sink.url.clone());
        closed_loop(c, s.duration, move |_, _| {
            let req = http.post(&url).body("{}");
            async move { req.send().await.is_ok_and(|r| r.status().is_success()) }
        })
        .await
    };
    rows.push(row("H: load generator -> sink", c, &h, None, None, "the loopback HTTP limit"));

    let mut api = stack::start("api", &env).await;
    let mut ingress = stack::start("ingress", &env).await;
    let admin: Value = http
        .post(api.url("/admin/v1/tenant"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "bench"}))
        .send()
        .await?
        .json()
        .await?;
    let tenant =
        Arc::new(Tenant { http: http.clone(), api: api.url(""), key: admin["apiKey"].as_str().unwrap().into() });
    let app1 = tenant.post("/api/v1/app", json!({"name": "one"})).await?["id"].as_str().unwrap().to_owned();
    tenant.post(&format!("/api/v1/app/{app1}/endpoint"), json!({"url": format!("{}/one", sink.url)})).await?;
    let source = tenant
        .post("/api/v1/source", json!({"name": "stripe", "provider": "stripe", "secret": STRIPE_SECRET, "appId": app1}))
        .await?;
    let in_url = ingress.url(&format!("/in/{}", source["id"].as_str().unwrap()));

    eprintln!("ingress: unique Stripe events");
    let unique = {
        let (http, url) = (http.clone(), in_url.clone());
        closed_loop(c, s.duration, move |client, n| {
            let body = format!(r#"{{"id":"evt_u_{client}_{n}","type":"bench.event","data":{{}}}}"#);
            let req = http
                .post(&url)
                .header("content-type", "application/json")
                .header("stripe-signature", stripe_sig(body.as_bytes()))
                .body(body);
            async move { req.send().await.is_ok_and(|r| r.status() == 200) }
        })
        .await
    };
    rows.push(row(
        "ingress: unique Stripe-signed events",
        c,
        &unique,
        Some((unique.rate() / p, "P")),
        Some((1.0, unique.rate() / p)),
        "admitted/s",
    ));

    eprintln!("ingress: 90% duplicates");
    let dups = {
        let (http, url) = (http.clone(), in_url.clone());
        // Duplicates replay events the unique run admitted (its first 100 per client).
        closed_loop(c, s.duration, move |client, n| {
            let id = if n % 10 == 0 { format!("evt_d_{client}_{n}") } else { format!("evt_u_{client}_{}", n % 100) };
            let body = format!(r#"{{"id":"{id}","type":"bench.event","data":{{}}}}"#);
            let req = http
                .post(&url)
                .header("content-type", "application/json")
                .header("stripe-signature", stripe_sig(body.as_bytes()))
                .body(body);
            async move { req.send().await.is_ok_and(|r| r.status() == 200) }
        })
        .await
    };
    let dup_ratio = dups.rate() / unique.rate();
    rows.push(row(
        "ingress: 90 % duplicates",
        c,
        &dups,
        Some((dup_ratio, "unique")),
        Some((3.0, dup_ratio)),
        "answered/s",
    ));

    eprintln!("egress: message creation");
    let created = {
        let (http, url, key) = (http.clone(), api.url(&format!("/api/v1/app/{app1}/msg")), tenant.key.clone());
        closed_loop(c, s.duration, move |_, _| {
            let req = http.post(&url).bearer_auth(&key).json(&json!({"eventType": "bench", "payload": {"k": 1}}));
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await
    };
    rows.push(row(
        "egress: message creation (API)",
        c,
        &created,
        Some((created.rate() / p, "P")),
        Some((1.0, created.rate() / p)),
        "created/s, 1 endpoint each",
    ));

    // Deliveries: start from an empty outbox, publish with no worker running, then
    // time a worker draining it.
    let psql = |sql: &str| std::process::Command::new("psql").args([stack.database_url.as_str(), "-qc", sql]).status();
    psql("TRUNCATE messages, deliveries, attempts, message_event_ids")?;
    let n = s.deliveries;
    eprintln!("egress: {n} messages to 1 endpoint");
    publish(&tenant, &app1, n, c).await?;
    let before = sink.count();
    let mut worker = stack::start("worker", &env).await;
    let took = wait_for(&sink, before + n as u64, Duration::from_secs(600)).await?;
    let one = n as f64 / took.as_secs_f64();
    worker.stop().await;
    rows.push(delivery_row(&format!("egress: deliver {n} messages to 1 endpoint"), one, h.rate()));

    let app10 = tenant.post("/api/v1/app", json!({"name": "ten"})).await?["id"].as_str().unwrap().to_owned();
    for i in 0..10 {
        tenant.post(&format!("/api/v1/app/{app10}/endpoint"), json!({"url": format!("{}/ten/{i}", sink.url)})).await?;
    }
    psql("TRUNCATE messages, deliveries, attempts, message_event_ids")?;
    eprintln!("egress: {} messages to 10 endpoints", n / 10);
    publish(&tenant, &app10, n / 10, c).await?;
    let before = sink.count();
    let mut worker = stack::start("worker", &env).await;
    let took = wait_for(&sink, before + n as u64, Duration::from_secs(600)).await?;
    let ten = n as f64 / took.as_secs_f64();
    worker.stop().await;
    rows.push(delivery_row(&format!("egress: deliver {} messages to 10 endpoints", n / 10), ten, h.rate()));

    // Lag at half the peak rate: paced publishing, a running worker, payloads
    // stamped at send time (so the lag includes the commit).
    psql("TRUNCATE messages, deliveries, attempts, message_event_ids")?;
    let mut worker = stack::start("worker", &env).await;
    // Half the peak, where the peak is what both ends sustain: delivery, and creation.
    let rate = (one.min(created.rate()) / 2.0).max(1.0);
    eprintln!("egress: lag at {rate:.0}/s (half the peak)");
    sink.reset_lag();
    let before = sink.count();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * s.duration.as_secs_f64()) as usize;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sends = Vec::new();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(4 * c));
    let paced = Instant::now();
    for _ in 0..total {
        tick.tick().await;
        let permit = in_flight.clone().acquire_owned().await?;
        let req = http
            .post(api.url(&format!("/api/v1/app/{app1}/msg")))
            .bearer_auth(&tenant.key)
            .header("content-type", "application/json")
            .body(format!(r#"{{"eventType":"bench","payload":{{"t":{},"k":1}}}}"#, now_micros()));
        sends.push(tokio::spawn(async move {
            let ok = req.send().await.is_ok_and(|r| r.status() == 202);
            drop(permit);
            ok
        }));
    }
    let mut accepted = 0u64;
    for t in sends {
        accepted += t.await? as u64;
    }
    let achieved = total as f64 / paced.elapsed().as_secs_f64();
    wait_for(&sink, before + accepted, Duration::from_secs(120)).await?;
    let lag = sink.lag.lock().expect("lag lock").clone();
    let (p50, p99) = (lag.value_at_quantile(0.5) as f64 / 1000.0, lag.value_at_quantile(0.99) as f64 / 1000.0);
    rows.push(Row {
        name: format!("egress: lag send -> attempt at {rate:.0}/s"),
        concurrency: 0,
        rate: achieved,
        p50_ms: Some(p50),
        p99_ms: Some(p99),
        ratio: None,
        bar: Some(("p99 < 100 ms".into(), p99 < 100.0)),
        note: format!("paced at half the peak; {} of {total} accepted", accepted),
    });

    for p in [&api, &ingress, &worker] {
        let mb = p.peak_rss_mb();
        rows.push(Row {
            name: format!("peak RSS: hookgate --role {}", p.role),
            concurrency: 0,
            rate: 0.0,
            p50_ms: None,
            p99_ms: None,
            ratio: None,
            bar: Some(("< 200 MB".into(), mb < 200.0)),
            note: format!("{mb:.1} MB"),
        });
    }
    worker.stop().await;
    ingress.stop().await;
    api.stop().await;
    rows.extend(crate::pruning::run(&stack.database_url, s.prune_rows).await?);
    Ok(rows)
}

fn delivery_row(name: &str, rate: f64, h: f64) -> Row {
    Row {
        name: name.into(),
        concurrency: 128,
        rate,
        p50_ms: None,
        p99_ms: None,
        ratio: Some((rate / h, "H".into())),
        bar: Some((">= 0.5 x".into(), rate / h >= 0.5)),
        note: "delivered/s, worker concurrency 128".into(),
    }
}
