//! The health queries: whether a connection answers, and what a server says of
//! itself for the replica check.

use super::StoreError;

/// What a server says of itself for the replica check: which cluster and
/// database it is, whether it is in recovery, and its WAL position (the primary's
/// write position, a replica's replay position), as text (`pg_lsn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub system: i64,
    pub database: String,
    pub in_recovery: bool,
    pub lsn: Option<String>,
}

/// An empty query: whether a connection still answers (the pool's check after a stall).
pub async fn answers(db: &tokio_postgres::Client) -> Result<(), StoreError> {
    db.simple_query("").await?;
    Ok(())
}

/// The server's identity and WAL position.
pub async fn position(db: &impl tokio_postgres::GenericClient) -> Result<Position, StoreError> {
    let row = db
        .query_one(
            "SELECT (pg_control_system()).system_identifier AS system, current_database()::text AS database,
                    pg_is_in_recovery() AS in_recovery,
                    (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text
                        AS lsn",
            &[],
        )
        .await?;
    Ok(Position {
        system: row.get("system"),
        database: row.get("database"),
        in_recovery: row.get("in_recovery"),
        lsn: row.get("lsn"),
    })
}
