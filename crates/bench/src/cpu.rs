//! CPU time spent by the system under test, read from `/proc`: the Hookgate
//! processes, the bench's Postgres (postmaster, live backends, and the backends
//! that already exited, which the kernel folds into the postmaster's children
//! time) and its Redis. The load generator and the sink run in this process and
//! are left out. Beside CPU, what Postgres wrote to its write-ahead log (bytes,
//! and the flushes to disk that commits waited for), for the capacity model.

use std::fs;

use crate::stack::Hookgate;

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds at one instant, by part.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub hookgate: f64,
    pub postgres: f64,
    pub redis: f64,
    /// WAL position, in bytes, and WAL flushes (`pg_stat_wal.wal_sync`) so far;
    /// `None` if they could not be read.
    pub wal: Option<(f64, f64)>,
}

/// CPU used between two samples, per unit of work, in microseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PerUnit {
    pub total_us: f64,
    pub postgres_us: f64,
    /// WAL bytes and WAL flushes (the disk writes commits wait for) per unit,
    /// when both samples could be read.
    pub wal: Option<(f64, f64)>,
}

impl Sample {
    pub fn per(&self, later: &Sample, units: u64) -> PerUnit {
        let n = units.max(1) as f64;
        let pg = later.postgres - self.postgres;
        let all = (later.hookgate - self.hookgate) + pg + (later.redis - self.redis);
        PerUnit {
            total_us: all * 1e6 / n,
            postgres_us: pg * 1e6 / n,
            wal: self.wal.zip(later.wal).map(|((b0, s0), (b1, s1))| ((b1 - b0) / n, (s1 - s0) / n)),
        }
    }
}

/// Where the bench's Postgres and Redis run.
pub struct Meter {
    postmaster: u32,
    redis: Option<u32>,
    db: tokio_postgres::Client,
}

/// utime, stime, cutime, cstime and ppid of one process, in ticks.
struct Stat {
    ppid: u32,
    own: u64,
    children: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after it.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    Some(Stat { ppid: n(1) as u32, own: n(11) + n(12), children: n(13) + n(14) })
}

fn pids() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc").into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str()?.parse().ok())
}

/// The tables that grow with each message, admitted or created, and its
/// deliveries: what a day of retained messages holds on disk.
pub const RETAINED: [&str; 7] = [
    "messages",
    "deliveries",
    "attempts",
    "inbound_events",
    "inbound_keys",
    "message_event_ids",
    "message_request_keys",
];

impl Meter {
    /// What Postgres is doing besides the statements of the moment: autovacuum
    /// workers, statements running for over 50 ms and background writes to disk
    /// in progress, each as one short line with what it waits on.
    pub async fn busy(&self) -> Vec<String> {
        let rows = self
            .db
            .query(
                // What each waits on too: a stall of the disk shows as statements
                // (and their COMMITs) waiting on WAL I/O at once, not as work.
                "SELECT backend_type || COALESCE(': ' || left(regexp_replace(NULLIF(query, ''), '\\s+', ' ', 'g'), 90), '')
                    || ' (' || concat_ws(', ', round(extract(epoch FROM now() - query_start) * 1000) || ' ms',
                                         'waiting ' || wait_event_type || ':' || wait_event) || ')'
                 FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid()
                   AND ((state = 'active' AND (backend_type = 'autovacuum worker'
                        OR (backend_type = 'client backend' AND now() - query_start > interval '50 ms'
                            AND wait_event IS DISTINCT FROM 'ClientRead')))
                     -- The WAL writer or checkpointer in the middle of a write or a flush.
                     OR (backend_type IN ('walwriter', 'checkpointer', 'background writer')
                         AND wait_event_type = 'IO'))",
                &[],
            )
            .await;
        rows.map(|rows| rows.iter().map(|r| r.get(0)).collect()).unwrap_or_default()
    }

    /// The current WAL position, as Postgres prints it (for `pg_waldump -s/-e`).
    pub async fn lsn(&self) -> anyhow::Result<String> {
        Ok(self.db.query_one("SELECT pg_current_wal_lsn()::text", &[]).await?.get(0))
    }

    /// Bytes on disk of each of [`RETAINED`] (every partition, with its indexes
    /// and TOAST), in that order.
    pub async fn retained_bytes(&self) -> anyhow::Result<Vec<i64>> {
        let rows = self
            .db
            .query(
                // A plain table has no partition tree: its own size.
                "SELECT COALESCE((SELECT sum(pg_total_relation_size(p.relid)) FROM pg_partition_tree(t.name::regclass) p),
                                 pg_total_relation_size(t.name::regclass))::int8
                 FROM unnest($1::text[]) WITH ORDINALITY AS t(name, n) ORDER BY t.n",
                &[&RETAINED.as_slice()],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Finds the postmaster (from its data directory's `postmaster.pid`) and the
    /// Redis server listening on `redis_port`.
    pub async fn find(database_url: &str, redis_port: u16) -> anyhow::Result<Self> {
        let (client, conn) = tokio_postgres::connect(database_url, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        let dir: String = client.query_one("SELECT current_setting('data_directory')", &[]).await?.get(0);
        let pidfile = fs::read_to_string(format!("{dir}/postmaster.pid"))?;
        let postmaster = pidfile.lines().next().unwrap_or("").trim().parse()?;
        let port = format!(":{redis_port}");
        let redis = pids().find(|pid| {
            let cmd = fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmd.starts_with("redis-server") && cmd.contains(&port)
        });
        Ok(Meter { postmaster, redis, db: client })
    }

    /// The CPU seconds used so far by the given Hookgate processes, Postgres and
    /// Redis, and the WAL written so far. Backends report their WAL flushes to
    /// `pg_stat_wal` at most once a second, so over a few seconds that count is
    /// good to about a second's worth (the last second of a scenario may count
    /// in the next).
    pub async fn sample(&self, hookgate: &[&Hookgate]) -> Sample {
        let wal = self
            .db
            .query_one(
                "SELECT (pg_current_wal_lsn() - '0/0')::float8 AS wal_bytes, wal_sync::float8 AS wal_syncs
                 FROM pg_stat_wal",
                &[],
            )
            .await;
        let wal = wal.ok().map(|r| (r.get("wal_bytes"), r.get("wal_syncs")));
        let secs = |ticks: u64| ticks as f64 / TICKS;
        // A Hookgate process's own CPU, and its children's: the transformation
        // sandboxes it runs (those still alive, and those it has reaped).
        let ids: Vec<u32> = hookgate.iter().filter_map(|p| p.child.id()).collect();
        let mut hg: u64 = ids.iter().copied().filter_map(stat).map(|s| s.own + s.children).sum();
        hg += pids().filter_map(stat).filter(|s| ids.contains(&s.ppid)).map(|s| s.own + s.children).sum::<u64>();
        let mut pg = stat(self.postmaster).map(|s| s.own + s.children).unwrap_or(0);
        pg += pids().filter_map(stat).filter(|s| s.ppid == self.postmaster).map(|s| s.own + s.children).sum::<u64>();
        let redis = self.redis.and_then(stat).map(|s| s.own).unwrap_or(0);
        Sample { hookgate: secs(hg), postgres: secs(pg), redis: secs(redis), wal }
    }
}
