//! The time-partitioned tables' partitions: listed from the catalog, made ahead
//! of time, and detached and dropped once every row in them is past retention.
//!
//! Each family is partitioned by range of a ULID-bearing id (so by the time the
//! id was made): `inbound_events` by `id`, `messages` by `id`, `deliveries` and
//! `attempts` by their message's id, so that a message and everything under it
//! live in partitions of the same range and go together. Bounds are the lowest
//! id of an instant ([`crate::ids::floor`]).
//!
//! Every step takes only locks that let reads and writes go on: a new partition
//! is made as a table of its own and then attached (SHARE UPDATE EXCLUSIVE on the
//! parent, where `CREATE TABLE … PARTITION OF` would take ACCESS EXCLUSIVE), an
//! old one is detached `CONCURRENTLY` and then dropped.

use chrono::{DateTime, Duration as Days, TimeZone, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids;

/// Which retention decides when a family's partitions may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// The longest dedupe window of any source (inbound events).
    Inbound,
    /// The longest message retention of any tenant (messages, deliveries, attempts).
    Messages,
}

/// One partitioned table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub table: &'static str,
    /// The prefix of the ids its partition key holds.
    pub prefix: &'static str,
    pub horizon: Horizon,
    /// Its partitions' `fillfactor`, where updates should find room on the page
    /// (a delivery's claim is a HOT update only then).
    pub fillfactor: Option<u8>,
}

/// Every partitioned table, in the order their old partitions are dropped: what
/// hangs under a message before the message, so that no reader meets a delivery
/// whose message is gone.
pub const FAMILIES: [Family; 4] = [
    Family { table: "attempts", prefix: "msg", horizon: Horizon::Messages, fillfactor: None },
    Family { table: "deliveries", prefix: "msg", horizon: Horizon::Messages, fillfactor: Some(70) },
    Family { table: "messages", prefix: "msg", horizon: Horizon::Messages, fillfactor: None },
    Family { table: "inbound_events", prefix: "evt", horizon: Horizon::Inbound, fillfactor: None },
];

/// The partitioned family of `table`, if it is one.
pub fn family(table: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.table == table)
}

/// One partition, as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub family: &'static str,
    pub name: String,
    /// `None` for the lowest partition (`MINVALUE`: the table from before partitioning).
    pub from: Option<DateTime<Utc>>,
    pub to: DateTime<Utc>,
    /// A `DETACH … CONCURRENTLY` that was interrupted: it must be finalized.
    pub detach_pending: bool,
}

/// The instant an id bound stands for; `None` for `MINVALUE` or a bound that is
/// not one of ours.
fn bound_time(bound: &str) -> Option<DateTime<Utc>> {
    let body = bound.trim().trim_matches('\'');
    let (_, ulid) = body.split_once('_')?;
    let ulid = ulid::Ulid::from_string(ulid).ok()?;
    Utc.timestamp_millis_opt(ulid.timestamp_ms() as i64).single()
}

/// Parses `FOR VALUES FROM ('msg_…') TO ('msg_…')` as Postgres prints a bound.
fn parse_bounds(expr: &str) -> Option<(Option<DateTime<Utc>>, DateTime<Utc>)> {
    let rest = expr.strip_prefix("FOR VALUES FROM (")?;
    let (from, rest) = rest.split_once(") TO (")?;
    let to = rest.strip_suffix(')')?;
    let from = if from == "MINVALUE" { None } else { Some(bound_time(from)?) };
    Some((from, bound_time(to)?))
}

/// Every partition of every family, oldest first within a family.
pub async fn list(db: &impl GenericClient) -> Result<Vec<Partition>, StoreError> {
    let tables: Vec<&str> = FAMILIES.iter().map(|f| f.table).collect();
    let rows = db
        .query(
            // `pg_get_expr(…, 0)`: with the partition's oid it would open the partition,
            // and queue behind a detach's ACCESS EXCLUSIVE request on it.
            "SELECT p.relname::text AS parent, c.relname::text AS partition, pg_get_expr(c.relpartbound, 0) AS bound,
                 i.inhdetachpending
             FROM pg_inherits i
             JOIN pg_class c ON c.oid = i.inhrelid
             JOIN pg_class p ON p.oid = i.inhparent
             WHERE p.relname = ANY ($1) AND p.relnamespace = current_schema()::regnamespace
               AND c.relnamespace = current_schema()::regnamespace",
            &[&tables],
        )
        .await?;
    let mut out = Vec::new();
    for r in rows {
        let parent: String = r.get("parent");
        let Some(family) = family(&parent) else { continue };
        let expr: String = r.get("bound");
        let Some((from, to)) = parse_bounds(&expr) else {
            return Err(StoreError::Corrupt(format!(
                "partition {} has a bound not of Hookgate's: {expr}",
                r.get::<_, String>("partition")
            )));
        };
        out.push(Partition {
            family: family.table,
            name: r.get("partition"),
            from,
            to,
            detach_pending: r.get("inhdetachpending"),
        });
    }
    out.sort_by(|a, b| (a.family, a.to).cmp(&(b.family, b.to)));
    Ok(out)
}

/// The advisory lock keys of making partitions ("hgpart") and of dropping them ("hgdrop").
const ATTACH_KEY: i64 = 0x6867_7061_7274;
const DROP_KEY: i64 = 0x6867_6472_6f70;
/// Unpartitioned tables on the admission path whose statistics `analyze_stale`
/// keeps up with their growth.
const STALE_WATCHED: [&str; 2] = ["inbound_keys", "message_event_ids"];

/// The lock of `analyze_stale`: one process analyzes at a time.
const ANALYZE_KEY: i64 = 0x6867_616e_616c;

/// In a transaction: takes the lock of making partitions unless another process holds it
/// (then `false`), and bounds the wait for the parent tables' lock, so that an
/// attach gives up soon rather than queue behind another's attach or detach.
pub async fn lock_for_attach(tx: &impl GenericClient) -> Result<bool, StoreError> {
    tx.batch_execute("SET LOCAL lock_timeout = '2s'").await?;
    Ok(tx.query_one("SELECT pg_try_advisory_xact_lock($1)", &[&ATTACH_KEY]).await?.get(0))
}

/// On a connection of its own: the session bounds a detach needs (it waits for
/// the queries that may still read its partition) and the lock of dropping partitions, or
/// `false` if another process holds it. Release with [`unlock_session`].
pub async fn lock_for_detach(client: &impl GenericClient) -> Result<bool, StoreError> {
    // No lock_timeout: a detach's second phase waits for the transactions that
    // saw the partition, and a lock timeout there would leave it pending. Only
    // schema changes and vacuum conflict with what it takes.
    client.batch_execute("SET statement_timeout = '10min'; SET lock_timeout = 0").await?;
    Ok(client.query_one("SELECT pg_try_advisory_lock($1)", &[&DROP_KEY]).await?.get(0))
}

/// Sets the session's statement bound (`None`: none), for the maintenance
/// connection's long steps.
pub async fn statement_bound(
    client: &impl GenericClient,
    bound: Option<std::time::Duration>,
) -> Result<(), StoreError> {
    let ms = bound.map(|b| b.as_millis()).unwrap_or(0);
    client.batch_execute(&format!("SET statement_timeout = {ms}")).await?;
    Ok(())
}

pub async fn unlock_session(client: &impl GenericClient) -> Result<(), StoreError> {
    client.execute("SELECT pg_advisory_unlock($1)", &[&DROP_KEY]).await?;
    Ok(())
}

/// The database's clock, which decides the horizons.
pub async fn now(db: &impl GenericClient) -> Result<DateTime<Utc>, StoreError> {
    Ok(db.query_one("SELECT now()", &[]).await?.get(0))
}

/// The start of the UTC day `at` falls in.
pub fn day_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.date_naive().and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
}

/// A partition's name: its table and the UTC day it starts.
fn name_of(family: &Family, from: DateTime<Utc>) -> String {
    format!("{}_p{}", family.table, from.format("%Y%m%d"))
}

/// Makes `family`'s partitions, `days` wide, from the end of its highest one (or
/// from the day of `from` if it has none) until one reaches past `until`.
/// Returns how many were made. Callers serialise (see [`crate::partitions`]).
pub async fn ensure(
    db: &impl GenericClient,
    family: &Family,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    days: i64,
) -> Result<u32, StoreError> {
    let existing = list(db).await?;
    let mut start =
        existing.iter().filter(|p| p.family == family.table).map(|p| p.to).max().unwrap_or_else(|| day_of(from));
    let mut made = 0;
    while start <= until {
        let end = start + Days::days(days.max(1));
        create(db, family, start, end).await?;
        made += 1;
        start = end;
    }
    Ok(made)
}

/// Makes one partition `[from, to)`: a table like its parent, then attached. A
/// table of that name left by an interrupted earlier attempt is reused.
pub async fn create(
    db: &impl GenericClient,
    family: &Family,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), StoreError> {
    let name = name_of(family, from);
    let (lo, hi) = (ids::floor(family.prefix, from), ids::floor(family.prefix, to));
    let with = family.fillfactor.map(|f| format!(" WITH (fillfactor = {f})")).unwrap_or_default();
    db.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS \"{name}\" (LIKE \"{table}\" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES){with};
         ALTER TABLE \"{table}\" ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{lo}') TO ('{hi}')",
        table = family.table
    ))
    .await?;
    Ok(())
}

/// Attaches again, with its bounds, a partition whose detach was finished: its
/// rows are checked against the bounds (a scan of the table, whose rows no query
/// sees meanwhile; the parent stays open to reads and writes).
pub async fn reattach(db: &impl GenericClient, family: &Family, p: &Partition) -> Result<(), StoreError> {
    let lo = match p.from {
        Some(from) => format!("'{}'", ids::floor(family.prefix, from)),
        None => "MINVALUE".to_owned(),
    };
    let hi = ids::floor(family.prefix, p.to);
    let name = checked(&p.name)?;
    // Detached before its family kept room on its pages (0027): kept from now on.
    let room =
        family.fillfactor.map(|f| format!("ALTER TABLE \"{name}\" SET (fillfactor = {f}); ")).unwrap_or_default();
    db.batch_execute(&format!(
        "{room}ALTER TABLE \"{}\" ATTACH PARTITION \"{name}\" FOR VALUES FROM ({lo}) TO ('{hi}')",
        family.table,
    ))
    .await?;
    Ok(())
}

/// A partition name as Hookgate makes them (lowercase, digits, `_`), or an error:
/// the only names that go into DDL unquoted by Postgres.
pub(super) fn checked(name: &str) -> Result<&str, StoreError> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        Ok(name)
    } else {
        Err(StoreError::Corrupt(format!("not a partition name: {name}")))
    }
}

/// Detaches a partition without blocking readers and writers (it waits for the
/// queries that may still see it), or finishes a detach that was interrupted.
/// Must run outside a transaction.
pub async fn detach(db: &impl GenericClient, p: &Partition) -> Result<(), StoreError> {
    let how = if p.detach_pending { "FINALIZE" } else { "CONCURRENTLY" };
    db.batch_execute(&format!("ALTER TABLE \"{}\" DETACH PARTITION \"{}\" {how}", p.family, checked(&p.name)?)).await?;
    Ok(())
}

/// Tables that look like partitions of ours but belong to no parent: detached
/// by a process that died before it dropped them.
pub async fn detached_leftovers(db: &impl GenericClient) -> Result<Vec<String>, StoreError> {
    let rows = db
        .query(
            "SELECT c.relname::text FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND NOT c.relispartition
               AND c.relname ~ '^(inbound_events|messages|deliveries|attempts)_(p[0-9]{8}|legacy)$'",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Drops a detached partition's table.
pub async fn drop_table(db: &impl GenericClient, name: &str) -> Result<(), StoreError> {
    db.batch_execute(&format!("DROP TABLE IF EXISTS \"{}\"", checked(name)?)).await?;
    Ok(())
}

/// The horizons in days: the longest dedupe window any source has, and the
/// longest message retention any tenant has (each at least its default). A
/// partition whose every row is older than its family's horizon may go whole.
pub async fn horizons(
    db: &impl GenericClient,
    inbound_default: i32,
    message_default: i32,
) -> Result<(i32, i32), StoreError> {
    let row = db
        .query_one(
            "SELECT GREATEST($1, (SELECT max(COALESCE(s.retention_days, t.inbound_days, $1))
                                  FROM sources s JOIN tenants t ON t.id = s.tenant_id)) AS inbound_days,
                    GREATEST($2, (SELECT max(t.message_days) FROM tenants t)) AS message_days",
            &[&inbound_default, &message_default],
        )
        .await?;
    Ok((row.get("inbound_days"), row.get("message_days")))
}

/// Analyzes the tables whose statistics say far fewer rows than they hold: the
/// partitions of the time-partitioned families that hold rows but have no
/// statistics yet (a new day's partition, or one emptied by `TRUNCATE`), and
/// those, and the dedupe keys, that grew past twice what their last analysis
/// counted (and 500 rows more); returns their names. Postgres plans from those
/// statistics and keeps a generic plan until they change: taking a partition for
/// empty, it may plan a lookup by key through a narrower index or a scan of the
/// whole partition, a cost that grows with every row written until autovacuum
/// analyzes it (a minute or more, and a partition that doubles within that
/// minute is planned for the half it was). At most `most` per call, those without
/// statistics first, then the largest; each table is analyzed about log2(rows)
/// times in its life.
///
/// One process at a time (an advisory lock, skipped if taken), and never a
/// partition being detached.
///
/// Sampled coarsely (`default_statistics_target` 10, not 100): what these
/// analyses are for is the row counts, which do not depend on the sample, and a
/// tenth of the sample makes each a tenth of the work (an attempts partition of
/// 60,000 rows: 13-15 ms against 156-206 ms), done by a worker beside its
/// deliveries. Autovacuum's own analyses refine the histograms later.
pub async fn analyze_stale(db: &mut deadpool_postgres::Client, most: i64) -> Result<Vec<String>, StoreError> {
    let tables: Vec<&str> = FAMILIES.iter().map(|f| f.table).collect();
    let rows = db
        .query(
            "SELECT c.relname::text FROM pg_class c
             JOIN pg_stat_user_tables s ON s.relid = c.oid
             LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
             LEFT JOIN pg_class p ON p.oid = i.inhparent
             WHERE c.relnamespace = current_schema()::regnamespace
               AND ((p.relname = ANY ($1) AND NOT i.inhdetachpending) OR (i.inhrelid IS NULL AND c.relname = ANY ($3)))
               AND s.n_live_tup > 0
               AND (c.reltuples < 0 OR s.n_live_tup > 2 * c.reltuples + 500)
             -- Those without statistics first: they are what plans go most wrong on.
             ORDER BY c.reltuples < 0 DESC, s.n_live_tup DESC LIMIT $2",
            &[&tables, &most, &STALE_WATCHED.as_slice()],
        )
        .await?;
    let names: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).filter(|n| checked(n).is_ok()).collect();
    let mut done = Vec::new();
    // One transaction per table: a lock or a slow sample on one does not undo the
    // others, and the lock (a transaction's: released however it ends) is held
    // only while one table is analyzed.
    for name in names {
        let tx = db.transaction().await?;
        if !tx.query_one("SELECT pg_try_advisory_xact_lock($1)", &[&ANALYZE_KEY]).await?.get::<_, bool>(0) {
            break;
        }
        // Sampling a large table read from disk may take longer than a request's bound.
        tx.batch_execute(&format!(
            "SET LOCAL statement_timeout = '30s'; SET LOCAL default_statistics_target = 10; ANALYZE \"{name}\""
        ))
        .await?;
        tx.commit().await?;
        done.push(name);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_as_postgres_prints_them_parse_back_to_their_instants() {
        let day = Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0).unwrap();
        let next = day + Days::days(1);
        let expr = format!("FOR VALUES FROM ('{}') TO ('{}')", ids::floor("msg", day), ids::floor("msg", next));
        assert_eq!(parse_bounds(&expr), Some((Some(day), next)));
        let legacy = format!("FOR VALUES FROM (MINVALUE) TO ('{}')", ids::floor("evt", day));
        assert_eq!(parse_bounds(&legacy), Some((None, day)));
        assert_eq!(parse_bounds("FOR VALUES FROM ('x') TO ('y')"), None);
        assert_eq!(parse_bounds("DEFAULT"), None);
    }

    #[test]
    fn a_partition_is_named_by_its_table_and_first_day() {
        let day = Utc.with_ymd_and_hms(2026, 1, 9, 0, 0, 0).unwrap();
        assert_eq!(name_of(&FAMILIES[2], day), "messages_p20260109");
    }
}
