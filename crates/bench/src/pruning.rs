//! The pruning rows: one day of messages (generated directly in SQL into a day
//! partition of its own) removed by dropping its partition, and another such
//! day removed by `DELETE`, on the same durable Postgres in the same run, each
//! with its time and the write-ahead log it wrote.

use std::time::Instant;

use chrono::{Duration as Days, Utc};
use hookgate_shared::store::partitions::{self, day_of};

use crate::report::Row;

/// What removing one day cost.
struct Removal {
    seconds: f64,
    wal_bytes: i64,
}

async fn wal(db: &tokio_postgres::Client) -> anyhow::Result<String> {
    Ok(db.query_one("SELECT pg_current_wal_lsn()::text", &[]).await?.get(0))
}

async fn wal_since(db: &tokio_postgres::Client, start: &str) -> anyhow::Result<i64> {
    let row = db.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::int8", &[&start]).await?;
    Ok(row.get(0))
}

/// Fills the messages partition of `day` with `rows` messages of one tenant's
/// application, ids spread over the day (as one made at those instants), and
/// returns the partition's name.
async fn fill(db: &tokio_postgres::Client, day: chrono::DateTime<Utc>, rows: i64) -> anyhow::Result<String> {
    let messages = partitions::family("messages").expect("messages is partitioned");
    partitions::create(db, messages, day, day + Days::days(1)).await?;
    let step_ms = (86_400_000 / rows).max(1) as f64;
    db.execute(
        "INSERT INTO messages (tenant_id, app_id, id, event_type, payload, created_at)
         SELECT 'tnt_bench_prune', 'app_bench_prune', hookgate_id_floor('msg', $1::timestamptz + i * $3::float8 * interval '1 ms'),
                'bench.prune', convert_to('{\"n\":' || i || ',\"pad\":\"' || repeat('x', 200) || '\"}', 'UTF8'),
                $1::timestamptz + i * $3::float8 * interval '1 ms'
         FROM generate_series(0, $2::int8 - 1) AS i",
        &[&day, &rows, &step_ms],
    )
    .await?;
    // As a day's partition is long before it goes: vacuumed and analyzed. A fresh
    // one draws autovacuum's analyze, and the drop's detach waits for that to be
    // cancelled (a second: `deadlock_timeout`), which no real drop meets.
    let name = format!("messages_p{}", day.format("%Y%m%d"));
    // Two calls: VACUUM runs outside a transaction, and statements sent together share one.
    db.batch_execute(&format!("VACUUM (ANALYZE) \"{name}\"")).await?;
    db.batch_execute("CHECKPOINT").await?;
    Ok(name)
}

/// Both ways of removing a day of `rows` messages; two rows of the table.
pub async fn run(database_url: &str, rows: i64) -> anyhow::Result<Vec<Row>> {
    let db = hookgate_tests::db::connect(database_url).await;
    db.batch_execute(
        "INSERT INTO tenants (id, name) VALUES ('tnt_bench_prune', 'prune') ON CONFLICT DO NOTHING;
         INSERT INTO applications (tenant_id, id, name) VALUES ('tnt_bench_prune', 'app_bench_prune', 'prune')
             ON CONFLICT DO NOTHING;
         SET statement_timeout = 0",
    )
    .await?;
    // Two days long past, so that nothing else lives in their partitions.
    let base = day_of(Utc::now()) - Days::days(3000);
    let (drop_day, delete_day) = (base, base + Days::days(1));
    eprintln!("pruning: filling two day partitions with {rows} messages each");
    let dropped = fill(&db, drop_day, rows).await?;
    fill(&db, delete_day, rows).await?;

    let (start, t) = (wal(&db).await?, Instant::now());
    let list = partitions::list(&db).await?;
    let p = list.iter().find(|p| p.name == dropped).expect("the partition just made");
    let listed = t.elapsed().as_secs_f64();
    partitions::detach(&db, p).await?;
    let detached = t.elapsed().as_secs_f64();
    partitions::drop_table(&db, &dropped).await?;
    let by_drop = Removal { seconds: t.elapsed().as_secs_f64(), wal_bytes: wal_since(&db, &start).await? };
    let steps = format!(
        "; list {:.0} ms, detach {:.0} ms, drop {:.0} ms",
        listed * 1000.0,
        (detached - listed) * 1000.0,
        (by_drop.seconds - detached) * 1000.0
    );

    let (lo, hi) = (
        hookgate_shared::ids::floor("msg", delete_day),
        hookgate_shared::ids::floor("msg", delete_day + Days::days(1)),
    );
    let (start, t) = (wal(&db).await?, Instant::now());
    let n = db.execute("DELETE FROM messages WHERE id >= $1 AND id < $2", &[&lo, &hi]).await?;
    anyhow::ensure!(n == rows as u64, "DELETE removed {n} of {rows}");
    let by_delete = Removal { seconds: t.elapsed().as_secs_f64(), wal_bytes: wal_since(&db, &start).await? };
    // Leave no trace for the next run.
    let list = partitions::list(&db).await?;
    if let Some(p) = list.iter().find(|p| p.from == Some(delete_day)) {
        partitions::detach(&db, p).await?;
        partitions::drop_table(&db, &p.name).await?;
    }

    let mb = |b: i64| b as f64 / 1_048_576.0;
    let row = |name: &str, r: &Removal, ratio: Option<(f64, String)>, more: &str| Row {
        name: name.into(),
        concurrency: 0,
        rate: rows as f64 / r.seconds,
        p50_ms: None,
        p99_ms: None,
        ratio,
        bar: None,
        cpu: None,
        note: format!("{:.0} ms, {:.2} MB of WAL (rows/s removed){more}", r.seconds * 1000.0, mb(r.wal_bytes)),
    };
    Ok(vec![
        row(&format!("prune {rows} rows: DELETE"), &by_delete, None, ""),
        row(
            &format!("prune {rows} rows: drop the partition"),
            &by_drop,
            Some((by_delete.seconds / by_drop.seconds.max(1e-6), "DELETE".into())),
            &steps,
        ),
    ])
}
