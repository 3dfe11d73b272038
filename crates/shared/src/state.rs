//! The state every handler shares: config, Postgres pool, Redis, metrics, keys.
//! Each side keeps its own extra state (its metrics, its workers) next to it.

use std::sync::Arc;

use crate::{
    cache::Caches,
    crypto::ApiKeyHasher,
    db,
    metrics::Metrics,
    redis::{Redis, RedisTarget},
    store::{notify::Wake, StoreError},
    Config,
};

/// Shared, cheaply cloned state of one process.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: deadpool_postgres::Pool,
    pub redis: Redis,
    pub metrics: Metrics,
    pub api_keys: ApiKeyHasher,
    /// Wakes delivery workers after a commit that added deliveries.
    pub wake: Wake,
    /// Hot lookups, kept for a second (see `cache.rs`).
    pub caches: Caches,
    /// Quota enforcement and usage tallies.
    pub limits: Arc<crate::limits::Limits>,
}

impl AppState {
    /// How long one step of database work may take before it is abandoned as
    /// `Unavailable` ([`db::bounded`]): waiting for a connection, then the statement.
    pub fn db_budget(&self) -> std::time::Duration {
        self.config.db_timeout + self.config.db_statement_timeout
    }

    /// Builds the state; connects to nothing yet, so it works while Postgres is down.
    pub fn new(config: Config) -> Result<Self, StoreError> {
        let metrics = Metrics::new(config.metrics_tenant_label);
        let db = db::pool(&config.database_url, config.db_pool_size, config.db_timeout, config.db_statement_timeout)?;
        let target = config.redis_url.as_ref().map(|url| RedisTarget {
            url: url.clone(),
            cluster: config.redis_cluster,
            sentinel_master: config.redis_sentinel_master.clone(),
            sentinel_password: config.redis_sentinel_password.clone(),
            ca_file: config.redis_ca_file.clone(),
        });
        let redis =
            Redis::new(target.as_ref(), &config.redis_prefix, config.redis_timeout, metrics.redis_errors.clone())
                .map_err(|e| StoreError::Pool(format!("redis: {e}")))?;
        if !redis.is_enabled() {
            tracing::warn!("REDIS_URL is unset: running without Redis, Postgres alone decides");
        }
        let api_keys = config.master_key.api_key_hasher();
        let wake = Wake::new(db.clone(), config.db_timeout + config.db_statement_timeout);
        let limits = Arc::new(crate::limits::Limits::new(redis.clone()));
        Ok(AppState { config: Arc::new(config), db, redis, metrics, api_keys, wake, caches: Caches::default(), limits })
    }
}
