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
    /// Connections with one generic plan per statement, joining by lookups only,
    /// for the delivery worker (`db::Plans::Generic`); none is opened in a process
    /// that runs no worker.
    generic_db: deadpool_postgres::Pool,
    pub redis: Redis,
    pub metrics: Metrics,
    pub api_keys: ApiKeyHasher,
    /// Wakes delivery workers after a commit that added deliveries.
    pub wake: Wake,
    /// Hot lookups, kept for a second (see `cache.rs`).
    pub caches: Caches,
    /// Quota enforcement and usage tallies.
    pub limits: Arc<crate::limits::Limits>,
    /// Holds message creation back while delivery workers fall behind.
    pub admission: crate::admission::Admission,
    /// Bounds the lookups of callers not yet known (see `gate.rs`).
    pub pre_auth: crate::gate::PreAuthGate,
    /// The form inbound dedupe keys are stored in.
    pub inbound_keys: crate::inbound_keys::InboundKeys,
    /// Hookgate's own Postgres and Redis, which no endpoint or destination may reach.
    pub own_services: Arc<crate::own_services::OwnServices>,
    /// The streaming replica for reads that tolerate staleness, when configured.
    pub replica: Option<crate::replica::Replica>,
}

impl AppState {
    /// How long one step of database work may take before it is abandoned as
    /// `Unavailable` ([`db::bounded`]): waiting for a connection, then the statement.
    pub fn db_budget(&self) -> std::time::Duration {
        self.config.db_timeout + self.config.db_statement_timeout
    }

    /// This state with `db` planning each statement once (`db::Plans::Generic`):
    /// the delivery worker's, whose batch statements Postgres would otherwise plan
    /// again on every run.
    pub fn with_generic_plans(&self) -> AppState {
        AppState { db: self.generic_db.clone(), ..self.clone() }
    }

    /// The process's pools by name, for the pool gauges: `main`, and `worker`
    /// once the delivery worker has opened a connection (a process without a
    /// worker never does).
    pub fn pools(&self) -> Vec<(&'static str, &deadpool_postgres::Pool)> {
        let mut pools = vec![("main", &self.db)];
        if let Some(r) = &self.replica {
            pools.extend(r.members().iter().map(|m| ("replica", m.pool())));
        }
        if self.generic_db.status().size > 0 {
            pools.push(("worker", &self.generic_db));
        }
        pools
    }

    /// Builds the state; connects to nothing yet, so it works while Postgres is down.
    pub fn new(config: Config) -> Result<Self, StoreError> {
        // TLS clients that take the process's default (Redis's) get ring, which
        // Hookgate's own TLS uses: with a second provider linked in (a
        // dependency's), rustls would otherwise refuse to choose one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let metrics = Metrics::new(config.metrics_tenant_label);
        let pool = |plans| {
            db::pool(&config.database_url, config.db_pool_size, config.db_timeout, config.db_statement_timeout, plans)
        };
        let (db, generic_db) = (pool(db::Plans::Chosen)?, pool(db::Plans::Generic)?);
        let replica = match &config.database_replica_url {
            Some(url) => Some(crate::replica::Replica::new(db::pools_per_host(
                url,
                config.db_pool_size,
                config.db_timeout,
                config.db_statement_timeout,
            )?)),
            None => None,
        };
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
        let inbound_keys = crate::inbound_keys::InboundKeys::new(config.master_key.inbound_keyer());
        let wake = Wake::new(db.clone(), config.db_timeout + config.db_statement_timeout);
        let limits = Arc::new(crate::limits::Limits::new(redis.clone()));
        let admission = crate::admission::Admission::new(db.clone(), config.db_timeout + config.db_statement_timeout);
        let config_pool_size = config.db_pool_size;
        let own_services = Arc::new(
            crate::own_services::OwnServices::from_config(&config).reporting(metrics.own_servers_unresolved.clone()),
        );
        Ok(AppState {
            config: Arc::new(config),
            db,
            generic_db,
            redis,
            metrics,
            api_keys,
            wake,
            caches: Caches::default(),
            limits,
            admission,
            pre_auth: crate::gate::PreAuthGate::new(config_pool_size),
            inbound_keys,
            own_services,
            replica,
        })
    }
}
