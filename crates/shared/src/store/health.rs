//! The readiness probe's query: whether Postgres answers now.

use deadpool_postgres::Pool;

use super::StoreError;
use crate::db;

/// Whether Postgres answers a trivial query within `limit`.
pub async fn ping(pool: &Pool, limit: std::time::Duration) -> Result<(), StoreError> {
    db::bounded(limit, async {
        let client = db::conn(pool).await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    })
    .await
}
