//! `delivery_pressure`: how far behind each delivery worker is, reported by the
//! workers and read by the processes that create messages (`crate::admission`).

use tokio_postgres::GenericClient;

use super::StoreError;

/// Reports this worker's pressure: how many milliseconds work it could start
/// has waited for it.
pub async fn report(db: &impl GenericClient, worker: &str, pressure_ms: i32) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO delivery_pressure (worker, pressure_ms, at) VALUES ($1, $2, now())
         ON CONFLICT (worker) DO UPDATE SET pressure_ms = EXCLUDED.pressure_ms, at = EXCLUDED.at",
        &[&worker, &pressure_ms],
    )
    .await?;
    Ok(())
}

/// The highest pressure any worker reported in the last few seconds (a worker
/// that stopped reporting is gone, not behind); removes reports a minute old.
pub async fn read(db: &impl GenericClient) -> Result<i32, StoreError> {
    let row = db
        .query_one(
            "WITH gone AS (DELETE FROM delivery_pressure WHERE at < now() - interval '1 minute')
             SELECT COALESCE(max(pressure_ms), 0) FROM delivery_pressure WHERE at > now() - interval '3 seconds'",
            &[],
        )
        .await?;
    Ok(row.get(0))
}
