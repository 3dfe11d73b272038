//! The readiness probe's query: whether Postgres answers now.

use deadpool_postgres::Pool;

use super::StoreError;
use crate::db;

/// Whether Postgres answers a trivial query now (bounded by the pool's timeouts).
pub async fn ping(pool: &Pool) -> Result<(), StoreError> {
    let client = db::conn(pool).await?;
    client.simple_query("SELECT 1").await?;
    Ok(())
}
