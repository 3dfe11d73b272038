//! Applies `migrations/*.sql` in order, once each, recorded in `hookgate_migrations`.
//!
//! A session-level advisory lock serialises concurrent runners: the others poll
//! for it, then find everything applied and change nothing. Each migration runs in
//! its own transaction together with its record, so a failed one leaves no trace.
//!
//! A migration whose first line is [`NO_TRANSACTION`] runs statement by statement
//! outside a transaction, for what cannot run inside one (`CREATE INDEX
//! CONCURRENTLY`, which builds an index without blocking writes). Its record is
//! written after its last statement, so a runner that dies midway runs it again
//! from the start: such a migration must be written to be re-run (`DROP INDEX
//! CONCURRENTLY IF EXISTS` before each `CREATE INDEX CONCURRENTLY`, which also
//! clears an invalid index a failed build left).

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use crate::store::{partition_indexes, StoreError};

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// Arbitrary, fixed: the advisory lock key of the migration runner.
const LOCK_KEY: i64 = 0x686f_6f6b_6761_7465; // "hookgate"

/// What a run did.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub applied: Vec<&'static str>,
    pub already: usize,
    /// A switch migration the run stopped before (see [`SWITCH`]).
    pub stopped_at: Option<&'static str>,
    /// When it stopped: the instant until which the previous release may go on
    /// writing (the partitioning cutover), moved on by each such run.
    pub switch_by: Option<chrono::DateTime<chrono::Utc>>,
    /// A contract migration the run stopped before (see [`CONTRACT`]).
    pub contract_pending: Option<&'static str>,
}

/// The first line of a migration that must run outside a transaction.
pub const NO_TRANSACTION: &str = "-- hookgate:no-transaction";

/// The first line of a *switch*: a migration that the previous release cannot
/// run through (it would write wrongly to the new schema), so every process of
/// it must be stopped first. On a database an earlier run migrated, a run
/// applies a switch only when told to ([`Switch::Apply`]); it stops before it
/// otherwise. A new installation has no previous release and goes straight
/// through.
pub const SWITCH: &str = "-- hookgate:switch";

/// The first line of a *contract*: a migration that takes away what the previous
/// release still uses (a column it reads, a table it writes), which this release
/// no longer needs. A run on a database in use stops before it unless told to
/// ([`Contracts::Apply`]): the workers apply it by themselves once no process of
/// an older release is connected ([`crate::contract`]). It runs in a
/// transaction, and this release works before it and after it.
pub const CONTRACT: &str = "-- hookgate:contract";

/// Whether a run may apply a pending contract migration on a database in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contracts {
    /// Stop before it: a process of the previous release may still run.
    Hold,
    /// Apply it: no process of an older release is connected.
    Apply,
}

/// The schema level this binary knows: the number of its last migration. Each
/// process announces it in its connections' `application_name`
/// (`hookgate/0044`), which is how a contract knows when the previous release has gone.
pub fn level() -> &'static str {
    MIGRATIONS.last().map_or("0000", |(v, _)| &v[..4.min(v.len())])
}

/// The `application_name`s of the other connections to this database: who is
/// connected, for a contract to wait on ([`crate::contract`]).
pub async fn connected_names(client: &Client) -> Result<Vec<String>, StoreError> {
    let rows = client
        .query(
            "SELECT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> ''",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The versions applied so far (none before the first run).
pub async fn applied(client: &Client) -> Result<std::collections::HashSet<String>, StoreError> {
    let table: bool = client.query_one("SELECT to_regclass('hookgate_migrations') IS NOT NULL", &[]).await?.get(0);
    if !table {
        return Ok(Default::default());
    }
    Ok(client.query("SELECT version FROM hookgate_migrations", &[]).await?.iter().map(|r| r.get(0)).collect())
}

/// The `application_name` a process of this release gives its connections:
/// Hookgate's level first (Postgres cuts names at 63 bytes: the tag survives),
/// then the endpoint kinds it knows (`kinds/8`: codes up to 8, for a new kind's
/// admission, `store::endpoint_kinds`), then `given`, the operator's own from
/// `DATABASE_URL`.
pub fn application_name(given: Option<&str>) -> String {
    let tag = format!("hookgate/{} {KINDS_TAG}{}", level(), crate::status::EndpointKind::known_up_to());
    match given {
        Some(g) => format!("{tag} {g}"),
        None => tag,
    }
}

/// Takes the runner's lock if it is free (true), for a contract's last look;
/// [`unlock`] gives it back. Statements on this session then wait at most 5 s
/// for a table's lock.
pub async fn try_lock(client: &Client) -> Result<bool, StoreError> {
    let got: bool = client.query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_KEY]).await?.get(0);
    if got {
        client.batch_execute("SET lock_timeout = '5s'").await?;
    }
    Ok(got)
}

pub async fn unlock(client: &Client) -> Result<(), StoreError> {
    client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await?;
    Ok(())
}

/// The partitioning switch: while a run holds before it, the previous release
/// writes below a cutover that each holding run moves on ([`extend_cutover`]).
const PARTITIONING_SWITCH: &str = "0017_partitioning_switch";

/// Whether a run may apply a pending switch migration on a database in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Stop before it (the previous release may still be running).
    Hold,
    /// Apply it: the operator has stopped the previous release.
    Apply,
}

/// The switch migrations not yet applied to this database, oldest first: a
/// release that needs them must not serve on it.
pub async fn pending_switches(client: &Client) -> Result<Vec<&'static str>, StoreError> {
    let done = applied(client).await?;
    Ok(MIGRATIONS.iter().filter(|(v, sql)| sql.starts_with(SWITCH) && !done.contains(*v)).map(|(v, _)| *v).collect())
}

/// This release's migrations not yet applied that are not contracts: a release
/// serves only once they are (its contracts may wait for the previous release
/// to go).
pub async fn pending_expands(client: &Client) -> Result<Vec<&'static str>, StoreError> {
    let done = applied(client).await?;
    Ok(MIGRATIONS.iter().filter(|(v, sql)| !sql.starts_with(CONTRACT) && !done.contains(*v)).map(|(v, _)| *v).collect())
}

/// The word before the highest endpoint kind code a process knows, in its
/// connections' `application_name`.
pub const KINDS_TAG: &str = "kinds/";

/// How long a runner waits for another one to finish.
const LOCK_WAIT: Duration = Duration::from_secs(3600);

/// Runs every pending migration, stopping before a switch on a database in use
/// unless `switch` says [`Switch::Apply`]; safe to call from many processes at once.
pub async fn run(client: &mut Client, switch: Switch) -> Result<Outcome, StoreError> {
    run_until(client, None, switch).await
}

/// Runs the pending migrations up to and including `last` (a number such as
/// `"0014"`; all with `None`): a database as an older release left it, for
/// upgrade tests.
pub async fn run_until(client: &mut Client, last: Option<&str>, switch: Switch) -> Result<Outcome, StoreError> {
    run_list(client, MIGRATIONS, last, switch, Contracts::Hold).await
}

/// Runs the pending migrations of `list` (the embedded ones, or a test's), up to
/// `last`, holding before switches and contracts as told.
pub async fn run_list(
    client: &mut Client,
    list: &'static [(&'static str, &'static str)],
    last: Option<&str>,
    switch: Switch,
    contracts: Contracts,
) -> Result<Outcome, StoreError> {
    // Polled, not waited for: a session blocked in `pg_advisory_lock` is a running
    // statement, which `CREATE INDEX CONCURRENTLY` in the holder would wait for.
    let started = Instant::now();
    loop {
        let got: bool = client.query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_KEY]).await?.get(0);
        if got {
            break;
        }
        if started.elapsed() > LOCK_WAIT {
            return Err(StoreError::TimedOut(
                "another `hookgate migrate` has held the migration lock for an hour".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A new installation admits its endpoint kinds straight away; on one in use
    // the workers admit a new kind once every process knows it (`contract::run`).
    let fresh = applied(client).await.map(|done| done.is_empty());
    let mut result = apply_pending(client, list, last, switch, contracts).await;
    if result.is_ok() && fresh.is_ok_and(|f| f) {
        result = crate::store::endpoint_kinds::admit(client).await.and(result);
    }
    // Unlock even when a migration failed; the connection may be reused.
    let unlock = client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await;
    let outcome = result?;
    unlock?;
    Ok(outcome)
}

async fn apply_pending(
    client: &mut Client,
    list: &'static [(&'static str, &'static str)],
    last: Option<&str>,
    switch: Switch,
    contracts: Contracts,
) -> Result<Outcome, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS hookgate_migrations (
                version text PRIMARY KEY,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let rows = client.query("SELECT version, checksum FROM hookgate_migrations", &[]).await?;
    let done: std::collections::HashMap<String, String> =
        rows.iter().map(|r| (r.get("version"), r.get("checksum"))).collect();
    let mut outcome =
        Outcome { applied: Vec::new(), already: 0, stopped_at: None, switch_by: None, contract_pending: None };
    // Migrated before this run: a previous release may be serving it.
    let in_use = !done.is_empty();
    // `last` names a version by its number ("0014") or whole stem.
    let upto = list.iter().take_while(|(v, _)| last.is_none_or(|l| &v[..l.len().min(v.len())] <= l));
    for (version, sql) in upto {
        let checksum = hex::encode(Sha256::digest(sql.as_bytes()));
        if !done.contains_key(*version) && sql.starts_with(SWITCH) && switch == Switch::Hold && in_use {
            outcome.stopped_at = Some(version);
            // Only the partitioning switch has a cutover the previous release writes below.
            if *version == PARTITIONING_SWITCH {
                outcome.switch_by = extend_cutover(client).await?;
            }
            return Ok(outcome);
        }
        if !done.contains_key(*version) && sql.starts_with(CONTRACT) && contracts == Contracts::Hold && in_use {
            outcome.contract_pending = Some(version);
            return Ok(outcome);
        }
        match done.get(*version) {
            Some(c) if *c == checksum => outcome.already += 1,
            Some(_) => return Err(StoreError::MigrationChanged(version.to_string())),
            None if sql.starts_with(NO_TRANSACTION) => {
                let statements =
                    statements(sql).map_err(|e| StoreError::Corrupt(format!("migration {version}: {e}")))?;
                for statement in &statements {
                    let partitioned = match partition_indexes::concurrent_index(statement) {
                        Some(index) if partition_indexes::is_partitioned(client, index.1).await? => Some(index),
                        _ => None,
                    };
                    match partitioned {
                        Some((name, table, definition)) => {
                            partition_indexes::build(client, name, table, definition).await?
                        }
                        None => client
                            .batch_execute(statement)
                            .await
                            .map_err(|e| StoreError::Migration { version: version.to_string(), source: e })?,
                    }
                }
                client
                    .execute(
                        "INSERT INTO hookgate_migrations (version, checksum) VALUES ($1, $2)",
                        &[version, &checksum],
                    )
                    .await?;
                tracing::info!(version, "applied migration (outside a transaction)");
                outcome.applied.push(version);
            }
            None => {
                let tx = client.transaction().await?;
                tx.batch_execute(sql)
                    .await
                    .map_err(|e| StoreError::Migration { version: version.to_string(), source: e })?;
                tx.execute(
                    "INSERT INTO hookgate_migrations (version, checksum) VALUES ($1, $2)",
                    &[version, &checksum],
                )
                .await?;
                tx.commit().await?;
                tracing::info!(version, "applied migration");
                outcome.applied.push(version);
            }
        }
    }
    Ok(outcome)
}

/// While a run holds before the partitioning switch, the previous release goes on
/// writing, and its new rows must stay below the cutover that 0016's checks
/// enforce: each holding run moves the cutover on when less than two weeks are
/// left (the checks made again, validated beside writes). Returns the cutover.
async fn extend_cutover(client: &Client) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    let exists: bool =
        client.query_one("SELECT to_regclass('hookgate_partition_cutover') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(None);
    }
    let moved = client
        .query_opt(
            "UPDATE hookgate_partition_cutover c
             SET below = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '30 days'
             WHERE c.below < now() + interval '14 days' RETURNING c.below",
            &[],
        )
        .await?;
    if moved.is_some() {
        for (table, column, prefix) in [
            ("messages", "id", "msg"),
            ("deliveries", "msg_id", "msg"),
            ("attempts", "msg_id", "msg"),
            ("inbound_events", "id", "evt"),
        ] {
            let bound: String = client
                .query_one("SELECT hookgate_id_floor($1, below) FROM hookgate_partition_cutover", &[&prefix])
                .await?
                .get(0);
            // One implicit transaction: the old check goes as the new one comes.
            client
                .batch_execute(&format!(
                    "SET lock_timeout = '10s';
                     ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_below_cutover;
                     ALTER TABLE {table} ADD CONSTRAINT {table}_below_cutover CHECK ({column} < '{bound}') NOT VALID"
                ))
                .await?;
            client.batch_execute(&format!("ALTER TABLE {table} VALIDATE CONSTRAINT {table}_below_cutover")).await?;
        }
        tracing::info!("the partitioning cutover moved on while the switch waits");
    }
    Ok(client.query_opt("SELECT below FROM hookgate_partition_cutover", &[]).await?.map(|r| r.get(0)))
}

/// A no-transaction migration's statements: each ends with `;` as the last
/// character of a line outside a `$$`-quoted body (a `DO $$ … $$;` block or a
/// function is one statement; no `;` at a line end inside a comment or other
/// string); comment-only chunks are dropped.
/// Text after the last statement that is not a comment is an error: a statement
/// without its `;` would otherwise be skipped, and the migration recorded as done.
fn statements(sql: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for line in sql.lines() {
        let line = line.trim_end();
        current.push_str(line);
        current.push('\n');
        if !line.trim_start().starts_with("--") && line.matches("$$").count() % 2 == 1 {
            quoted = !quoted;
        }
        if line.ends_with(';') && !quoted {
            if has_code(&current) {
                out.push(current.trim().to_owned());
            }
            current.clear();
        }
    }
    if has_code(&current) {
        return Err(format!("a statement does not end with `;` at a line end: {}", current.trim()));
    }
    Ok(out)
}

fn has_code(chunk: &str) -> bool {
    chunk.lines().any(|l| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with("--") && l != ";"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last migration before expand/contract: those after it never take away
    /// in an expand step, and are never switches.
    const LAST_BEFORE_CONTRACTS: &str = "0043";

    #[test]
    fn every_migration_after_0043_only_adds_unless_it_is_a_contract() {
        // What the previous release may still rely on, taken away or narrowed.
        const TAKES_AWAY: [&str; 11] = [
            "DROP ",
            "RENAME",
            "ALTER COLUMN",
            "SET NOT NULL",
            "ADD CONSTRAINT",
            "CREATE UNIQUE",
            "CREATE OR REPLACE",
            "TRUNCATE",
            "DELETE FROM",
            "REVOKE",
            "DISABLE TRIGGER",
        ];
        // A concurrent build drops the invalid index a failed one left: that is allowed.
        const REBUILD: &str = "DROP INDEX CONCURRENTLY IF EXISTS";
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| &v[..4] > LAST_BEFORE_CONTRACTS) {
            assert!(!sql.starts_with(SWITCH), "{version}: no more switches; split it into expand and contract");
            if sql.starts_with(CONTRACT) {
                continue;
            }
            let code: String = sql.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join(" ");
            let flat = code.to_uppercase().split_whitespace().collect::<Vec<_>>().join(" ").replace(REBUILD, "");
            for words in TAKES_AWAY {
                assert!(!flat.contains(words), "{version} is an expand step but has `{words}`: move it to a contract");
            }
        }
    }

    #[test]
    fn the_level_is_the_last_migrations_number() {
        assert_eq!(level(), &MIGRATIONS.last().unwrap().0[..4]);
        assert!(level() >= LAST_BEFORE_CONTRACTS);
    }

    #[test]
    fn a_no_transaction_migration_splits_into_its_statements() {
        let sql = "-- hookgate:no-transaction\n-- why\nDROP INDEX CONCURRENTLY IF EXISTS a;\nCREATE INDEX CONCURRENTLY a\n    ON t (x);\n-- end\n";
        let got = statements(sql).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].ends_with("DROP INDEX CONCURRENTLY IF EXISTS a;"), "{got:?}");
        assert_eq!(got[1], "CREATE INDEX CONCURRENTLY a\n    ON t (x);");
    }

    #[test]
    fn a_dollar_quoted_block_is_one_statement() {
        let sql = "-- hookgate:no-transaction\nDO $$\nBEGIN\n    PERFORM 1;\n    COMMIT;\nEND\n$$;\nSELECT 2;\n";
        let got = statements(sql).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("DO $$") && got[0].ends_with("$$;"), "{got:?}");
        let open = "-- hookgate:no-transaction\nDO $$\nBEGIN\n    PERFORM 1;\n";
        assert!(statements(open).is_err(), "an unclosed body is an error, not skipped");
    }

    #[test]
    fn windows_line_ends_split_the_same() {
        let sql = "-- hookgate:no-transaction\r\nDROP INDEX CONCURRENTLY IF EXISTS a;\r\nCREATE INDEX CONCURRENTLY a ON t (x);\r\n";
        assert_eq!(statements(sql).unwrap().len(), 2);
    }

    #[test]
    fn a_statement_without_its_semicolon_is_an_error_not_skipped() {
        let sql =
            "-- hookgate:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS a;\nCREATE INDEX CONCURRENTLY a ON t (x)\n";
        assert!(statements(sql).unwrap_err().contains("CREATE INDEX CONCURRENTLY a"));
        let sql = "-- hookgate:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS a; -- note\nSELECT 1;\n";
        assert_eq!(statements(sql).unwrap().len(), 1, "`; -- note` does not end a statement: the two run as one");
    }

    #[test]
    fn every_no_transaction_migration_splits_and_is_rerunnable() {
        for (version, sql) in MIGRATIONS.iter().filter(|(_, s)| s.starts_with(NO_TRANSACTION)) {
            let all = statements(sql).unwrap_or_else(|e| panic!("{version}: {e}"));
            assert!(!all.is_empty(), "{version}: no statement");
            for st in &all {
                let code: String = st
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("--"))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_uppercase();
                assert!(!code.contains("CREATE INDEX") || code.contains("CONCURRENTLY"), "{version}: {st}");
                // On a partitioned table the runner's own build drops what a failed one left.
                let partitioned = crate::store::partition_indexes::concurrent_index(st)
                    .is_some_and(|(_, t, _)| crate::store::partitions::family(t).is_some());
                if code.contains("CREATE INDEX") && !partitioned {
                    let name = code.split_whitespace().skip_while(|w| *w != "CONCURRENTLY").nth(1).unwrap_or_default();
                    let dropped = all
                        .iter()
                        .any(|d| d.to_uppercase().contains(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name};")));
                    assert!(dropped, "{version}: `{name}` is not dropped first, so a failed build blocks a re-run");
                }
            }
        }
    }
}
