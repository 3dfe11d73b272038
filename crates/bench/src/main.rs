//! `make bench`: starts its own durable Postgres, Redis, sink and release-built
//! Hookgate processes on loopback, measures the baselines (`P`: pgbench's bare
//! `INSERT … ON CONFLICT DO NOTHING`; `H`: straight to the sink) and the scenarios
//! in the same run, and prints one table (JSON in target/bench/).

mod bed;
mod cpu;
mod destinations;
mod engine;
mod filters;
mod load;
mod noisy;
mod pace;
mod pgbench;
mod profile;
mod pruning;
mod reads;
mod report;
mod requests;
mod scenarios;
mod sink;
mod stack;
mod sustained;
mod transforms;

use std::time::Duration;

/// Run-wide settings, from the environment.
#[derive(Clone, Copy)]
pub struct Settings {
    /// Closed-loop clients per scenario.
    pub concurrency: usize,
    /// Length of each timed scenario.
    pub duration: Duration,
    /// Deliveries of the delivery scenarios (20,000 in the terms).
    pub deliveries: usize,
    /// Rows of the day that the pruning rows remove (1,000,000).
    pub prune_rows: i64,
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings {
        concurrency: env_num("BENCH_CONCURRENCY", 64) as usize,
        duration: Duration::from_secs(env_num("BENCH_SECS", 10)),
        deliveries: env_num("BENCH_DELIVERIES", 20_000) as usize,
        prune_rows: env_num("BENCH_PRUNE_ROWS", 1_000_000) as i64,
    };
    let rows = scenarios::run_all(settings).await?;
    let table = report::render(&rows, &settings);
    println!("{table}");
    report::write_json(&rows, &settings)?;
    // A scenario that measured nothing is a broken instrument, not a slow gateway.
    let broken: Vec<&str> =
        rows.iter().filter(|r| r.concurrency > 0 && r.rate <= 0.0).map(|r| r.name.as_str()).collect();
    anyhow::ensure!(broken.is_empty(), "scenarios measured nothing: {broken:?}");
    Ok(())
}
