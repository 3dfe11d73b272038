//! The fleet's health as the console shows it: the delivery backlog across every
//! tenant and the delivery workers that reported lately.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;

/// Deliveries waiting or in flight, and how late the most overdue one is.
#[derive(Debug, Clone)]
pub struct Backlog {
    /// Waiting for an attempt (a retry's time to come, or due) or in flight.
    pub waiting: i64,
    /// Of those, due now or in flight.
    pub due: i64,
    /// When the most overdue delivery was due.
    pub oldest_due: Option<DateTime<Utc>>,
}

/// The backlog, read through the partial index of waiting deliveries (its size
/// is the backlog's, not the table's); paused deliveries (no due time) are not
/// waiting, as `hookgate_deliveries_pending` counts them.
pub async fn backlog(db: &impl GenericClient) -> Result<Backlog, StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) AS waiting, count(*) FILTER (WHERE next_attempt_at <= now()) AS due,
                    min(next_attempt_at) FILTER (WHERE next_attempt_at <= now()) AS oldest_due
             FROM deliveries WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL",
            &[],
        )
        .await?;
    Ok(Backlog { waiting: row.get("waiting"), due: row.get("due"), oldest_due: row.get("oldest_due") })
}

/// A delivery worker that reported in the last minute.
#[derive(Debug, Clone)]
pub struct Worker {
    pub name: String,
    /// How long work it could start waited for it, in milliseconds.
    pub pressure_ms: i32,
    pub seen_at: DateTime<Utc>,
}

/// The workers that reported their pressure in the last minute, most behind first.
pub async fn workers(db: &impl GenericClient) -> Result<Vec<Worker>, StoreError> {
    let rows = db
        .query(
            "SELECT worker, pressure_ms, at FROM delivery_pressure WHERE at > now() - interval '1 minute'
             ORDER BY pressure_ms DESC, worker LIMIT 200",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Worker { name: r.get("worker"), pressure_ms: r.get("pressure_ms"), seen_at: r.get("at") })
        .collect())
}
