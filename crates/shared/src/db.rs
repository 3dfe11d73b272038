//! The Postgres connection pool, with timeouts so that a down database answers fast.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

pub use deadpool_postgres::{Client, Transaction};

use crate::store::StoreError;

/// Builds the pool; no connection is made until the first query, so a process can
/// start while Postgres is down and become ready when it returns.
pub fn pool(url: &str, size: usize, timeout: Duration) -> Result<Pool, StoreError> {
    let mut pg: tokio_postgres::Config = url.parse().map_err(StoreError::Config)?;
    pg.connect_timeout(timeout);
    if pg.get_application_name().is_none() {
        pg.application_name("hookgate");
    }
    let manager = Manager::from_config(pg, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|e| StoreError::Pool(e.to_string()))
}

/// Takes a connection from the pool.
pub async fn conn(pool: &Pool) -> Result<Client, StoreError> {
    pool.get().await.map_err(StoreError::from)
}
