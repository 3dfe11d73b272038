//! Applies `migrations/*.sql` in order, once each, recorded in `hookgate_migrations`.
//!
//! A session-level advisory lock serialises concurrent runners: the second waits,
//! then finds everything applied and changes nothing. Each migration runs in its
//! own transaction together with its record, so a failed one leaves no trace.

use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use crate::store::StoreError;

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// Arbitrary, fixed: the advisory lock key of the migration runner.
const LOCK_KEY: i64 = 0x686f_6f6b_6761_7465; // "hookgate"

/// What a run did.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub applied: Vec<&'static str>,
    pub already: usize,
}

/// Runs every pending migration; safe to call from many processes at once.
pub async fn run(client: &mut Client) -> Result<Outcome, StoreError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY]).await?;
    let result = apply_pending(client).await;
    // Unlock even when a migration failed; the connection may be reused.
    let unlock = client.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await;
    let outcome = result?;
    unlock?;
    Ok(outcome)
}

async fn apply_pending(client: &mut Client) -> Result<Outcome, StoreError> {
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
    let done: std::collections::HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let mut outcome = Outcome { applied: Vec::new(), already: 0 };
    for (version, sql) in MIGRATIONS {
        let checksum = hex::encode(Sha256::digest(sql.as_bytes()));
        match done.get(*version) {
            Some(c) if *c == checksum => outcome.already += 1,
            Some(_) => return Err(StoreError::MigrationChanged(version.to_string())),
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
