//! Baseline `P`: pgbench committing one `INSERT … ON CONFLICT DO NOTHING` of a
//! random text key into a table with a text primary key, at the same concurrency.

use std::process::Command;

pub fn run(database_url: &str, clients: usize, secs: u64) -> anyhow::Result<f64> {
    let psql = |sql: &str| Command::new("psql").args([database_url, "-qc", sql]).status();
    psql("DROP TABLE IF EXISTS bench_keys; CREATE TABLE bench_keys (k text PRIMARY KEY)")?;
    let script = std::env::temp_dir().join("hookgate-bench-insert.sql");
    std::fs::write(&script, "INSERT INTO bench_keys VALUES (md5(random()::text)) ON CONFLICT DO NOTHING;\n")?;
    let out = Command::new("pgbench")
        .args(["-n", "-c", &clients.to_string(), "-j", "2", "-T", &secs.to_string(), "-f"])
        .arg(&script)
        .arg(database_url)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "pgbench failed: {}", String::from_utf8_lossy(&out.stderr));
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.trim_start_matches("tps = ").split(' ').next()?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no tps in pgbench output: {text}"))?;
    psql("DROP TABLE bench_keys")?;
    Ok(tps)
}
