//! The scenarios of `make bench`, each against its baseline measured in this run.

use std::time::Duration;

use base64::Engine;
use serde_json::json;

use crate::{
    bed::{publish, Bed},
    load::{closed_loop, Measured},
    pace::paced,
    pgbench,
    report::Row,
    requests::{stripe_post, timed_message, STRIPE_SECRET},
    sink::Sink,
    stack::{self, Stack},
    Settings,
};

fn row(name: &str, c: usize, m: &Measured, ratio: Option<(f64, &str)>, bar: Option<(f64, f64)>, note: &str) -> Row {
    Row {
        cpu: None,
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
        note: "the database's commit limit for one admitted key".into(),
        ..Row::default()
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

    let bed = Bed::up(stack, env, sink).await?;
    let tenant = bed.tenant("bench").await?;
    let app1 = tenant.app_to("one", &format!("{}/one", bed.sink.url), None).await?;
    let source = tenant
        .post("/api/v1/source", json!({"name": "stripe", "provider": "stripe", "secret": STRIPE_SECRET, "appId": app1}))
        .await?;
    let in_url = bed.ingress.url(&format!("/in/{}", source["id"].as_str().unwrap_or_default()));

    if let Some(rate) = std::env::var("BENCH_PROFILE_RATE").ok().and_then(|v| v.parse().ok()) {
        crate::profile::run(&bed, &tenant, &app1, &in_url, rate, s).await?;
        return Ok(rows);
    }
    if only("ingress") {
        eprintln!("ingress: unique Stripe events");
        let before = bed.cpu(None).await;
        let unique = {
            let (http, url) = (bed.http.clone(), in_url.clone());
            closed_loop(c, s.duration, move |client, n| {
                let body = format!(r#"{{"id":"evt_u_{client}_{n}","type":"bench.event","data":{{}}}}"#);
                let req = stripe_post(&http, &url, body);
                async move { req.send().await.is_ok_and(|r| r.status() == 200) }
            })
            .await
        };
        let mut r = row(
            "ingress: unique Stripe-signed events",
            c,
            &unique,
            Some((unique.rate() / p, "P")),
            Some((1.0, unique.rate() / p)),
            "admitted/s",
        );
        r.cpu = Some(before.per(&bed.cpu(None).await, unique.ok));
        rows.push(r);

        eprintln!("ingress: 90% duplicates");
        let before = bed.cpu(None).await;
        let dups = {
            let (http, url) = (bed.http.clone(), in_url.clone());
            // Duplicates replay events the unique run admitted (its first 100 per client).
            closed_loop(c, s.duration, move |client, n| {
                let id =
                    if n % 10 == 0 { format!("evt_d_{client}_{n}") } else { format!("evt_u_{client}_{}", n % 100) };
                let body = format!(r#"{{"id":"{id}","type":"bench.event","data":{{}}}}"#);
                let req = stripe_post(&http, &url, body);
                async move { req.send().await.is_ok_and(|r| r.status() == 200) }
            })
            .await
        };
        let dup_ratio = dups.rate() / unique.rate();
        let mut r = row(
            "ingress: 90 % duplicates",
            c,
            &dups,
            Some((dup_ratio, "unique")),
            Some((3.0, dup_ratio)),
            "answered/s",
        );
        r.cpu = Some(before.per(&bed.cpu(None).await, dups.ok));
        rows.push(r);
    }

    eprintln!("egress: message creation");
    let before = bed.cpu(None).await;
    let created = {
        let (http, url, key) = (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app1}/msg")), tenant.key.clone());
        closed_loop(c, s.duration, move |_, _| {
            let req = http.post(&url).bearer_auth(&key).json(&json!({"eventType": "bench", "payload": {"k": 1}}));
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await
    };
    let mut r = row(
        "egress: message creation (API)",
        c,
        &created,
        Some((created.rate() / p, "P")),
        Some((1.0, created.rate() / p)),
        "created/s, 1 endpoint each",
    );
    r.cpu = Some(before.per(&bed.cpu(None).await, created.ok));
    rows.push(r);

    // Deliveries: start from an empty outbox, publish with no worker running, then
    // time a worker draining it.
    let n = s.deliveries;
    bed.truncate()?;
    eprintln!("egress: {n} messages to 1 endpoint");
    publish(&tenant, &app1, n, c).await?;
    let one = bed.drain(n, &format!("egress: deliver {n} messages to 1 endpoint"), h.rate(), &mut rows).await?;
    let plain_us = rows.last().and_then(|r| r.cpu.as_ref()).map_or(0.0, |c| c.total_us);
    if only("transform") {
        rows.extend(crate::transforms::run(&bed, &tenant, n, c, h.rate(), plain_us).await?);
    }
    if only("destination") {
        rows.extend(crate::destinations::run(&bed, &tenant, n, c, h.rate(), plain_us).await?);
    }
    if only("filter") {
        rows.extend(crate::filters::run(&bed, &tenant, c, s.duration).await?);
    }

    let app10 = tenant.post("/api/v1/app", json!({"name": "ten"})).await?["id"].as_str().unwrap_or_default().to_owned();
    for i in 0..10 {
        tenant
            .post(&format!("/api/v1/app/{app10}/endpoint"), json!({"url": format!("{}/ten/{i}", bed.sink.url)}))
            .await?;
    }
    bed.truncate()?;
    eprintln!("egress: {} messages to 10 endpoints", n / 10);
    publish(&tenant, &app10, n / 10, c).await?;
    bed.drain(n, &format!("egress: deliver {} messages to 10 endpoints", n / 10), h.rate(), &mut rows).await?;

    // The end-to-end peak: created and delivered at once, counted until the last
    // is delivered (the `burst` row); the lag row runs at half of it.
    let mut end_to_end = None;
    if only("burst") || only("lag") {
        let row = crate::engine::burst(&bed, &tenant, &app1, p, s).await?;
        end_to_end = Some(row.rate);
        rows.push(row);
    }
    if only("lag") {
        // Lag at half the end-to-end peak: paced publishing, a running worker,
        // payloads stamped at send time (so the lag includes the commit).
        bed.truncate()?;
        let mut worker = bed.start_worker().await;
        let rate = (end_to_end.unwrap_or_else(|| one.min(created.rate())) / 2.0).max(1.0);
        eprintln!("egress: lag at {rate:.0}/s (half the peak)");
        bed.sink.reset_lag();
        let before_count = bed.sink.count();
        let before = bed.cpu(Some(&worker)).await;
        let sent = {
            let (http, url, key) =
                (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app1}/msg")), tenant.key.clone());
            paced(rate, s.duration, 4 * c, move |_| {
                let req = timed_message(&http, &url, &key);
                async move { req.send().await.is_ok_and(|r| r.status() == 202) }
            })
            .await
        };
        bed.wait_for(before_count + sent.accepted, Duration::from_secs(120)).await?;
        let cpu = before.per(&bed.cpu(Some(&worker)).await, sent.accepted);
        let lag = bed.sink.lag.lock().expect("lag lock").clone();
        let (p50, p99) = (lag.value_at_quantile(0.5) as f64 / 1000.0, lag.value_at_quantile(0.99) as f64 / 1000.0);
        rows.push(Row {
            name: format!("egress: lag send -> attempt at {rate:.0}/s"),
            rate: sent.rate,
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            bar: Some(("p99 < 100 ms".into(), p99 < 100.0)),
            cpu: Some(cpu),
            note: format!("paced at half the end-to-end peak; {} of {} accepted", sent.accepted, sent.sent),
            ..Row::default()
        });
        worker.stop().await;
    }

    if only("sustained") {
        rows.extend(crate::sustained::run(&bed, &tenant, &app1, &in_url, p, s).await?);
    }
    if only("noisy") {
        rows.extend(crate::noisy::run(&bed, s).await?);
    }
    if only("backoff") {
        rows.push(crate::engine::backoff(&bed, s).await?);
    }
    if only("reads") {
        rows.extend(crate::reads::run(&bed, &tenant, &app1, s).await?);
    }

    let mut worker = bed.start_worker().await;
    for p in [&bed.api, &bed.ingress, &worker] {
        let mb = p.peak_rss_mb();
        rows.push(Row {
            name: format!("peak RSS: hookgate --role {}", p.role),
            bar: Some(("< 200 MB".into(), mb < 200.0)),
            note: format!("{mb:.1} MB"),
            ..Row::default()
        });
    }
    worker.stop().await;
    let Bed { mut api, mut ingress, .. } = bed;
    ingress.stop().await;
    api.stop().await;
    if only("prune") {
        rows.extend(crate::pruning::run(&stack.database_url, s.prune_rows).await?);
    }
    Ok(rows)
}

/// Whether a group of scenarios runs: `BENCH_ONLY` (comma-separated: ingress,
/// transform, destination, burst, lag, sustained, noisy, backoff, reads, prune) picks some; unset runs all. The baselines,
/// creation and delivery always run (the others' rates derive from them).
fn only(group: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |v| v.split(',').any(|g| g.trim() == group))
}
