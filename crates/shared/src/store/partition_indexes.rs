//! An index on a partitioned table built without blocking writes, for the
//! migration runner: Postgres has no `CREATE INDEX CONCURRENTLY` on a
//! partitioned table, so the parent's index is made empty (`ON ONLY`, invalid
//! until every partition has its own), each partition's is built concurrently
//! and attached, and the parent's turns valid with the last.

use std::time::Duration;

use tokio_postgres::{error::SqlState, Client};

use super::{partitions, StoreError};

/// `CREATE INDEX CONCURRENTLY name ON table rest;` as its name, table and the
/// rest (without the `;`), comments dropped; `None` for any other statement.
/// On a partitioned table the runner builds it partition by partition
/// ([`build`]), as Postgres cannot.
pub fn concurrent_index(statement: &str) -> Option<(&str, &str, &str)> {
    let code = statement.lines().find(|l| !l.trim_start().starts_with("--") && !l.trim().is_empty())?;
    let at = statement.find(code)?;
    let rest = statement[at..].trim().strip_suffix(';')?;
    let rest = rest.strip_prefix("CREATE INDEX CONCURRENTLY ")?;
    let (name, rest) = rest.split_once(" ON ")?;
    let (table, definition) = rest.trim_start().split_once(' ')?;
    Some((partitions::checked(name.trim()).ok()?, partitions::checked(table).ok()?, definition.trim()))
}

/// Whether `table` (in the current schema) is partitioned: the runner builds its
/// `CREATE INDEX CONCURRENTLY` with [`build`].
pub async fn is_partitioned(client: &Client, table: &str) -> Result<bool, StoreError> {
    let row = client
        .query_opt(
            "SELECT c.relkind = 'p' FROM pg_class c
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace",
            &[&table],
        )
        .await?;
    Ok(row.is_some_and(|r| r.get(0)))
}

/// Builds index `name` on partitioned `table` with `definition` (what follows
/// the table in `CREATE INDEX`: the columns, a `WHERE`). Re-runnable from any
/// point it stopped at: a partition's index of the name this build gives it but
/// not attached (a failed build's, valid or not) is dropped and built again;
/// partitions made while it runs are found by the next round (one made after the
/// parent's index exists gets its own when attached); one being detached, or
/// dropped meanwhile (past retention), is left alone. Fails if the parent's index
/// is not valid at the end, so the migration is not recorded and is run again.
pub async fn build(client: &Client, name: &str, table: &str, definition: &str) -> Result<(), StoreError> {
    let (name, table) = (partitions::checked(name)?, partitions::checked(table)?);
    let suffix = name.strip_prefix(table).and_then(|s| s.strip_prefix('_')).unwrap_or(name);
    // Instant: an empty index on the parent alone. Its lock (SHARE, on the parent
    // only) waits for the writes in flight, and writers queue behind it meanwhile.
    briefly(client, &format!("CREATE INDEX IF NOT EXISTS {name} ON ONLY {table} {definition}")).await?;
    for _round in 0..8 {
        // Partitions without an index attached to `name`.
        let missing = client
            .query(
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = $1::text::regclass AND NOT i.inhdetachpending
                   AND NOT EXISTS (
                       SELECT 1 FROM pg_index ci JOIN pg_inherits ii ON ii.inhrelid = ci.indexrelid
                       WHERE ci.indrelid = c.oid AND ii.inhparent = $2::text::regclass)
                 ORDER BY 1",
                &[&table, &name],
            )
            .await?;
        if missing.is_empty() {
            break;
        }
        for row in &missing {
            let partition = partitions::checked(row.get(0))?.to_owned();
            let own = format!("{partition}_{suffix}");
            // Postgres would cut a longer name, and find another index by it.
            if own.len() > 63 {
                return Err(StoreError::Corrupt(format!("index name {own} is longer than Postgres keeps")));
            }
            // Each its own statement: a string of two would run as one transaction.
            client.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {own}")).await?;
            let build = format!("CREATE INDEX CONCURRENTLY {own} ON {partition} {definition}");
            match client.batch_execute(&build).await {
                // Dropped meanwhile (past retention): nothing to attach.
                Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => continue,
                done => done?,
            }
            briefly(client, &format!("ALTER INDEX {name} ATTACH PARTITION {own}")).await?;
        }
    }
    if !valid(client, name).await? {
        // Postgres checks the parent's validity only when a partition's index is
        // attached: after the last partition without one was dropped instead,
        // attaching one already attached checks it again.
        let attached = client
            .query_opt(
                "SELECT ci.relname::text FROM pg_inherits ii JOIN pg_class ci ON ci.oid = ii.inhrelid
                 WHERE ii.inhparent = $1::text::regclass ORDER BY 1 LIMIT 1",
                &[&name],
            )
            .await?;
        if let Some(row) = attached {
            let own = partitions::checked(row.get(0))?.to_owned();
            briefly(client, &format!("ALTER INDEX {name} ATTACH PARTITION {own}")).await?;
        }
    }
    match valid(client, name).await? {
        true => Ok(()),
        false => Err(StoreError::Corrupt(format!("index {name} on {table} is not valid after its build"))),
    }
}

async fn valid(client: &Client, index: &str) -> Result<bool, StoreError> {
    let sql = "SELECT indisvalid FROM pg_index WHERE indexrelid = $1::text::regclass";
    Ok(client.query_one(sql, &[&index]).await?.get(0))
}

/// Runs a statement whose lock is instant once granted, waiting at most a second
/// for it (so writers queue behind it no longer than that) and trying again two
/// seconds later, up to 20 times, when the wait runs out (a long transaction on
/// the table: the migration then fails, to be run again, rather than stall on).
async fn briefly(client: &Client, statement: &str) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        client.batch_execute("SET lock_timeout = '1s'").await?;
        let done = client.batch_execute(statement).await;
        // Reset whatever happened: the concurrent builds must wait as long as they need.
        client.batch_execute("RESET lock_timeout").await?;
        match done {
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) && tries < 20 => {
                tries += 1;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            other => return Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_concurrent_index_statement_reads_as_its_name_table_and_definition() {
        let st = "-- why\nCREATE INDEX CONCURRENTLY deliveries_by_endpoint ON deliveries (endpoint_id, msg_id);";
        assert_eq!(concurrent_index(st), Some(("deliveries_by_endpoint", "deliveries", "(endpoint_id, msg_id)")));
        let st = "CREATE INDEX CONCURRENTLY q ON deliveries (a)\n    WHERE status IN (1, 3);";
        assert_eq!(concurrent_index(st), Some(("q", "deliveries", "(a)\n    WHERE status IN (1, 3)")));
        assert_eq!(concurrent_index("DROP INDEX CONCURRENTLY IF EXISTS q;"), None);
        assert_eq!(concurrent_index("CREATE INDEX CONCURRENTLY \"Q\" ON t (a);"), None, "only plain names");
    }
}
