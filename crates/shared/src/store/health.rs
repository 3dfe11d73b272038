//! The readiness probe's query: whether Postgres answers now, and whether its
//! schema has every switch migration this release needs.

use deadpool_postgres::Pool;

use super::StoreError;
use crate::db;

/// Whether Postgres answers within `limit`; `Ok(Some(version))` when it does but
/// a switch migration this release needs is not applied yet (a process started
/// while Postgres was away could not refuse at start).
pub async fn ping(pool: &Pool, limit: std::time::Duration) -> Result<Option<&'static str>, StoreError> {
    db::bounded(limit, async {
        let client = db::conn(pool).await?;
        Ok(crate::migrate::pending_switches(&client).await?.first().copied())
    })
    .await
}

/// Where the primary's WAL is now, as text (`pg_lsn`): what a replica must have
/// replayed to be caught up.
pub async fn primary_position(db: &impl tokio_postgres::GenericClient) -> Result<String, StoreError> {
    let row = db.query_one("SELECT pg_current_wal_lsn()::text", &[]).await?;
    Ok(row.get(0))
}

/// How a replica stands against the primary's `position`.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaState {
    /// False for a server that is no replica (one promoted, say).
    pub in_recovery: bool,
    /// It has replayed everything the primary had written at `position`.
    pub caught_up: bool,
    /// Seconds since the last transaction it replayed was committed on the primary.
    pub since_last_replay: Option<f64>,
}

/// The replica's state against the primary's `position`.
pub async fn replica_state(
    db: &impl tokio_postgres::GenericClient,
    position: &str,
) -> Result<ReplicaState, StoreError> {
    let row = db
        .query_one(
            "SELECT pg_is_in_recovery(),
                    COALESCE(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false),
                    EXTRACT(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8",
            &[&position],
        )
        .await?;
    Ok(ReplicaState { in_recovery: row.get(0), caught_up: row.get(1), since_last_replay: row.get(2) })
}
