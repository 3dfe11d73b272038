//! The noisy-neighbour rows: tenant A has a backlog due to an endpoint that
//! answers after a second (then, in a second run, to one throttled to 10/s);
//! tenant B publishes 200/s to a fast endpoint meanwhile. B's lag, and how many
//! row updates per second the `deliveries` table takes while A's backlog waits.

use std::time::{Duration, Instant};

use crate::{
    bed::{publish, Bed},
    pace::paced,
    report::Row,
    requests::timed_message,
    Settings,
};

/// B's rate, in the terms.
const B_RATE: f64 = 200.0;
/// How long B's undelivered messages are waited for after the window.
const GRACE: Duration = Duration::from_secs(10);

/// A's endpoint in each run.
enum Neighbour {
    Slow,
    Throttled(i32),
}

pub async fn run(bed: &Bed, s: Settings) -> anyhow::Result<Vec<Row>> {
    let backlog = s.deliveries * 5 / 2;
    let mut rows = Vec::new();
    for (i, a) in [Neighbour::Slow, Neighbour::Throttled(10)].into_iter().enumerate() {
        rows.push(one_run(bed, s, backlog, a, i).await?);
    }
    Ok(rows)
}

/// Row updates so far on `deliveries` and its partitions (statistics that each
/// backend flushes about once a second).
async fn delivery_updates(bed: &Bed) -> anyhow::Result<i64> {
    let (client, conn) = tokio_postgres::connect(&bed.database_url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT COALESCE(sum(n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relname LIKE 'deliveries%'",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

async fn one_run(bed: &Bed, s: Settings, backlog: usize, a: Neighbour, i: usize) -> anyhow::Result<Row> {
    bed.truncate()?;
    let (a_url, throttle, what) = match a {
        Neighbour::Slow => (format!("{}/slow/a{i}", bed.sink.url), None, "answers after 1 s".to_owned()),
        Neighbour::Throttled(r) => (format!("{}/a{i}", bed.sink.url), Some(r), format!("throttled to {r}/s")),
    };
    let tenant_a = bed.tenant(&format!("noisy-a{i}")).await?;
    let app_a = tenant_a.app_to("a", &a_url, throttle).await?;
    let tenant_b = bed.tenant(&format!("quiet-b{i}")).await?;
    let app_b = tenant_b.app_to("b", &format!("{}/b{i}", bed.sink.url), None).await?;
    eprintln!("noisy neighbour: {backlog} deliveries due to an endpoint that {what}");
    publish(&tenant_a, &app_a, backlog, s.concurrency).await?;

    let mut worker = bed.start_worker().await;
    // Let A's backlog take the worker first, as it would have before B arrived.
    tokio::time::sleep(Duration::from_millis(500)).await;
    bed.sink.reset_lag();
    let stamped = bed.sink.stamped();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (updates0, at0) = (delivery_updates(bed).await?, Instant::now());
    let before = bed.cpu(Some(&worker)).await;
    let delivered0 = bed.sink.count();
    let sent = {
        let (http, url, key) =
            (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app_b}/msg")), tenant_b.key.clone());
        paced(B_RATE, s.duration, 512, move |_| {
            let req = timed_message(&http, &url, &key);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (updates1, wall) = (delivery_updates(bed).await?, at0.elapsed());
    let cpu = before.per(&bed.cpu(Some(&worker)).await, bed.sink.count() - delivered0);
    let waited = Instant::now();
    while bed.sink.stamped() - stamped < sent.accepted && waited.elapsed() < GRACE {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut lag = bed.sink.lag.lock().expect("lag lock").clone();
    let missing = sent.accepted.saturating_sub(bed.sink.stamped() - stamped);
    // Still undelivered after the grace: their lag is at least the grace.
    if missing > 0 {
        let _ = lag.record_n(GRACE.as_micros() as u64, missing);
    }
    worker.stop().await;
    let (p50, p99) = (lag.value_at_quantile(0.5) as f64 / 1000.0, lag.value_at_quantile(0.99) as f64 / 1000.0);
    let per_sec = (updates1 - updates0) as f64 / wall.as_secs_f64();
    let at_least = if missing > 0 {
        format!("; {missing} undelivered after {} s (p99 is a floor)", GRACE.as_secs())
    } else {
        String::new()
    };
    Ok(Row {
        name: format!("noisy neighbour: B's lag, A {what}"),
        rate: sent.rate,
        p50_ms: Some(p50),
        p99_ms: Some(p99),
        bar: Some(("p99 < 100 ms".into(), p99 < 100.0 && missing == 0)),
        cpu: Some(cpu),
        note: format!("B at {B_RATE:.0}/s, A {backlog} due; deliveries row updates {per_sec:.0}/s{at_least}"),
        ..Row::default()
    })
}
