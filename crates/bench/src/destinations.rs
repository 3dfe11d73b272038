//! What a destination beyond HTTP costs a delivery: the same drain as the plain
//! one, into a Postgres destination (a table on a second Postgres server of the
//! bench's own: Hookgate refuses its own database as a destination; that
//! server's CPU is not counted), side by side.

use std::{sync::Arc, time::Duration};

use serde_json::json;

use crate::{
    bed::{publish, Bed, Tenant},
    report::Row,
};

/// Drains `n` messages to a Postgres destination; rows for it and for its cost
/// over `plain_us` (CPU per delivery of the plain drain in this run).
pub async fn run(
    bed: &Bed,
    tenant: &Arc<Tenant>,
    n: usize,
    clients: usize,
    h: f64,
    plain_us: f64,
) -> anyhow::Result<Vec<Row>> {
    // Stopped and removed when dropped, at the end of the scenario.
    let server = hookgate_tests::servers::PgServer::start();
    let target = server.url();
    let app =
        tenant.post("/api/v1/app", json!({"name": "destination"})).await?["id"].as_str().unwrap_or_default().to_owned();
    let made = tenant
        .post(
            &format!("/api/v1/app/{app}/destination"),
            json!({"type": "postgres", "config": {"url": target, "tableName": "public.events"}}),
        )
        .await?;
    anyhow::ensure!(made["type"] == "postgres", "destination not made: {made}");
    bed.truncate()?;
    eprintln!("egress: {n} messages to a Postgres destination");
    publish(tenant, &app, n, clients).await?;
    let before = bed.cpu(None).await;
    let started = std::time::Instant::now();
    let mut worker = bed.start_worker().await;
    loop {
        // The table is made by the first delivery.
        let count = count(&target).unwrap_or(0);
        if count >= n as u64 {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "the destination got {count} of {n} rows");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    let cpu = before.per(&bed.cpu(Some(&worker)).await, n as u64);
    worker.stop().await;
    let rate = n as f64 / took.as_secs_f64();
    let total = cpu.total_us;
    let mut rows = vec![Row {
        name: format!("egress: deliver {n} messages to a Postgres destination"),
        concurrency: 128,
        rate,
        ratio: Some((rate / h, "H".into())),
        cpu: Some(cpu),
        note: "rows/s written to a table on a second Postgres server, worker concurrency 128".into(),
        ..Row::default()
    }];
    rows.push(Row {
        name: "destination: CPU per delivery over the plain drain".into(),
        note: format!(
            "{:.0} µs ({total:.0} against {plain_us:.0}): one keyed INSERT per message on one kept connection",
            total - plain_us
        ),
        ..Row::default()
    });
    Ok(rows)
}

fn count(url: &str) -> anyhow::Result<u64> {
    let out = std::process::Command::new("psql")
        .args([url, "-qAtc", "SELECT count(*) FROM public.events"])
        .stderr(std::process::Stdio::null())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}
