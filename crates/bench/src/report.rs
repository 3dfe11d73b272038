//! The table `make bench` prints, and its JSON copy under target/bench/.

use serde::Serialize;

use crate::{cpu::PerUnit, Settings};

/// One line of the table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    pub name: String,
    pub concurrency: usize,
    /// Per second; 0 for rows that only report memory.
    pub rate: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The ratio to its baseline, and what the baseline is.
    pub ratio: Option<(f64, String)>,
    /// The bar, as a ratio or a limit, and whether it is met.
    pub bar: Option<(String, bool)>,
    /// CPU of Hookgate, Postgres and Redis per message handled, Postgres's share,
    /// and the WAL bytes and flushes per message.
    pub cpu: Option<PerUnit>,
    pub note: String,
}

pub fn render(rows: &[Row], s: &Settings) -> String {
    let mut out = format!(
        "\nHookgate benchmark ({} s per scenario, concurrency {} unless noted)\n\n",
        s.duration.as_secs(),
        s.concurrency
    );
    out += &format!(
        "{:<44} {:>5} {:>11} {:>9} {:>9} {:>16} {:>18} {:>15} {:>15}  {}\n",
        "scenario", "conc", "per second", "p50 ms", "p99 ms", "ratio", "bar", "cpu us (pg)", "wal B (flush)", "note"
    );
    for r in rows {
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
        let ratio = r.ratio.as_ref().map(|(x, b)| format!("{x:.2} x {b}")).unwrap_or_else(|| "-".into());
        let bar =
            r.bar.as_ref().map(|(b, ok)| format!("{b} {}", if *ok { "met" } else { "MISSED" })).unwrap_or_default();
        let cpu = r.cpu.map(|c| format!("{:.0} ({:.0})", c.total_us, c.postgres_us)).unwrap_or_else(|| "-".into());
        let wal = r.cpu.and_then(|c| c.wal).map(|(b, s)| format!("{b:.0} ({s:.3})")).unwrap_or_else(|| "-".into());
        out += &format!(
            "{:<44} {:>5} {:>11.0} {:>9} {:>9} {:>16} {:>18} {:>15} {:>15}  {}\n",
            r.name,
            r.concurrency,
            r.rate,
            ms(r.p50_ms),
            ms(r.p99_ms),
            ratio,
            bar,
            cpu,
            wal,
            r.note
        );
    }
    out
}

pub fn write_json(rows: &[Row], s: &Settings) -> anyhow::Result<()> {
    let dir = crate::stack::root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let doc = serde_json::json!({
        "concurrency": s.concurrency,
        "seconds": s.duration.as_secs(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "rows": rows,
    });
    let path = dir.join("latest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
