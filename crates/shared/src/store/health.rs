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
