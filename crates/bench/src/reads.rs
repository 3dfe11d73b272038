//! The read path with and without a read replica: closed-loop clients paging an
//! application's message list while messages are published and delivered, once
//! through an api process reading the primary, once through one reading a
//! streaming standby (`HOOKGATE_DATABASE_REPLICA_URL`). The figure that moves is
//! the primary's CPU per read (the standby's own CPU is not counted: it would be
//! another machine's); on this one machine the standby shares the cores, so the
//! rates say less than they would with the standby on a host of its own.

use std::{sync::Arc, time::Duration};

use hookgate_tests::servers::{free_port, PgServer};

use crate::{
    bed::{publish, Bed, Tenant},
    load::closed_loop,
    pace::paced,
    report::Row,
    requests::timed_message,
    stack, Settings,
};

/// Messages published per second while the lists are read.
const WRITES_PER_SEC: f64 = 100.0;

pub async fn run(bed: &Bed, tenant: &Arc<Tenant>, app: &str, s: Settings) -> anyhow::Result<Vec<Row>> {
    let c = s.concurrency;
    // Messages the lists page through: 5,000 in a full run.
    let stock = (s.deliveries / 4).max(50);
    bed.truncate()?;
    let delivered = bed.sink.count();
    publish(tenant, app, stock, c).await?;
    let mut worker = bed.start_worker().await;
    bed.wait_for(delivered + stock as u64, Duration::from_secs(300)).await?;
    let primary_port: u16 =
        bed.database_url.rsplit(':').next().and_then(|p| p.split('/').next()?.parse().ok()).unwrap_or(0);
    let standby = PgServer::standby_of(primary_port, free_port());
    let mut env = bed.env.clone();
    env.insert("HOOKGATE_DATABASE_REPLICA_URL".into(), standby.url());
    let mut reader = stack::start("api", &env).await;
    // Checked every second: read once it has been found caught up.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut rows = Vec::new();
    let mut primary_us = None;
    for (label, api) in [("the primary", &bed.api), ("a replica", &reader)] {
        eprintln!("reads: message lists on {label}, {WRITES_PER_SEC}/s published meanwhile");
        bed.sink.reset_lag();
        let before = bed.meter.sample(&[&bed.api, &reader, &worker]).await;
        let list = api.url(&format!("/api/v1/app/{app}/msg?limit=50"));
        let publish_url = bed.api.url(&format!("/api/v1/app/{app}/msg"));
        let (http, key) = (bed.http.clone(), tenant.key.clone());
        let reads = {
            let (http, key) = (http.clone(), key.clone());
            closed_loop(c, s.duration, move |_, _| {
                let req = http.get(&list).bearer_auth(&key);
                async move { req.send().await.is_ok_and(|r| r.status() == 200) }
            })
        };
        let writes = paced(WRITES_PER_SEC, s.duration, 4 * c, move |_| {
            let req = timed_message(&http, &publish_url, &key);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        });
        let (reads, writes) = tokio::join!(reads, writes);
        let cpu = before.per(&bed.meter.sample(&[&bed.api, &reader, &worker]).await, reads.ok);
        let lag = bed.sink.lag.lock().expect("lag lock").value_at_quantile(0.99) as f64 / 1000.0;
        let ratio = primary_us.map(|p: f64| (cpu.postgres_us / p.max(0.001), "primary's".to_owned()));
        primary_us.get_or_insert(cpu.postgres_us);
        rows.push(Row {
            name: format!("reads: a page of 50 messages, read on {label}"),
            concurrency: c,
            rate: reads.rate(),
            p50_ms: Some(reads.p50_ms()),
            p99_ms: Some(reads.p99_ms()),
            ratio,
            cpu: Some(cpu),
            note: format!(
                "reads/s; the primary's Postgres {:.0} µs per read; {} of {} published meanwhile, delivery lag p99 {lag:.0} ms",
                cpu.postgres_us, writes.accepted, writes.sent
            ),
            ..Row::default()
        });
    }
    reader.stop().await;
    worker.stop().await;
    drop(standby);
    Ok(rows)
}
