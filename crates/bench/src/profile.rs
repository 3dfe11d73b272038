//! `BENCH_PROFILE_RATE=<messages/s>`: one step of the sustained row at that rate
//! (or, with `BENCH_PROFILE_DRAIN=<n>`, a worker draining `n` messages published
//! before it started), then the statements Postgres spent its time on
//! (`pg_stat_statements`, when the bench's Postgres preloads it:
//! `HOOKGATE_BENCH_PG_OPTIONS='-c shared_preload_libraries=pg_stat_statements'`).
//! For profiling, not a row.

use std::{sync::Arc, time::Duration};

use crate::{
    bed::{Bed, Tenant},
    Settings,
};

pub async fn run(
    bed: &Bed,
    tenant: &Arc<Tenant>,
    app: &str,
    in_url: &str,
    rate: f64,
    s: Settings,
) -> anyhow::Result<()> {
    let (client, conn) = tokio_postgres::connect(&bed.database_url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    // The extension can exist from an earlier run whose Postgres preloaded it: only a
    // reset that works says this Postgres is collecting.
    let stats = client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await.is_ok()
        && client.batch_execute("SELECT pg_stat_statements_reset()").await.is_ok();
    bed.truncate()?;
    let worker = bed.start_worker().await;
    // Warm: plans made, connections open.
    crate::sustained::one_step(bed, &worker, tenant, app, in_url, rate, Duration::from_secs(1), 99).await?;
    if stats {
        client.batch_execute("SELECT pg_stat_statements_reset()").await?;
    }
    let drain: Option<usize> = std::env::var("BENCH_PROFILE_DRAIN").ok().and_then(|v| v.parse().ok());
    let messages = if let Some(n) = drain {
        let mut worker = worker;
        worker.stop().await;
        bed.truncate()?;
        crate::bed::publish(tenant, app, n, s.concurrency).await?;
        if stats {
            client.batch_execute("SELECT pg_stat_statements_reset()").await?;
        }
        let base = bed.sink.count();
        let before = bed.cpu(None).await;
        let worker = bed.start_worker().await;
        let took = bed.wait_for(base + n as u64, Duration::from_secs(600)).await?;
        let cpu = before.per(&bed.cpu(Some(&worker)).await, n as u64);
        println!(
            "profile draining {n}: {:.0}/s, CPU {:.0} us per delivery (Postgres {:.0}), WAL {:?}",
            n as f64 / took.as_secs_f64(),
            cpu.total_us,
            cpu.postgres_us,
            cpu.wal
        );
        n as u64
    } else {
        let step = crate::sustained::one_step(bed, &worker, tenant, app, in_url, rate, s.duration, 100).await?;
        println!(
            "profile at {:.0}/s: p50 {:.1} ms, p99 {:.1} ms, backlog {}, CPU {:.0} us per message (Postgres {:.0}), WAL {:?}",
            step.rate, step.p50_ms, step.p99_ms, step.backlog, step.cpu.total_us, step.cpu.postgres_us, step.cpu.wal
        );
        step.messages
    };
    if !stats {
        println!("(no pg_stat_statements: set HOOKGATE_BENCH_PG_OPTIONS to preload it)");
        return Ok(());
    }
    let rows = client
        .query(
            "SELECT calls, total_exec_time, mean_exec_time, rows,
                CASE WHEN query LIKE '%BETWEEN w.lo AND w.hi%' THEN 'claim by hint: '
                     WHEN query LIKE '%ORDER BY d.next_attempt_at LIMIT w.room%' THEN 'claim of due queues: ' ELSE '' END
                || left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS shown_query
             FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
             ORDER BY total_exec_time DESC LIMIT 20",
            &[],
        )
        .await?;
    let per = |t: f64| t * 1000.0 / messages.max(1) as f64;
    println!("{:>8} {:>10} {:>9} {:>9} {:>10}  statement", "calls", "total ms", "mean ms", "rows", "us/msg");
    for r in rows {
        let (calls, total, mean, n, q): (i64, f64, f64, i64, String) =
            (r.get("calls"), r.get("total_exec_time"), r.get("mean_exec_time"), r.get("rows"), r.get("shown_query"));
        println!("{calls:>8} {total:>10.1} {mean:>9.3} {n:>9} {:>10.1}  {q}", per(total));
    }
    Ok(())
}
