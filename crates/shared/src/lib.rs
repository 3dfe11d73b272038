//! `hookgate-shared` owns the vocabulary and the storage every side shares: typed
//! ids (parsed at the edge), sources and states as enums, configuration, key
//! derivation and secret encryption, the Postgres pool and migrations, the Redis
//! client, the metrics registry, the error mapping, and the stores.
//!
//! It is the only crate that runs SQL, `LISTEN`/`NOTIFY` included (see
//! `docs/ARCHITECTURE.md`). Every store function takes the tenant id right after
//! its connection, so a query can never forget the tenant it is acting for; the
//! few exceptions are listed, with their reasons, beside the tidy test.

pub mod admission;
pub mod archive;
pub mod batch;
pub mod cache;
pub mod config;
pub mod contract;
pub mod cron_schedule;
pub mod crypto;
pub mod db;
pub mod endpoint_auth;
pub mod endpoint_secret;
pub mod filter;
pub mod gate;
pub mod http;
pub mod ids;
pub mod inbound_keys;
pub mod ingest;
pub mod limits;
pub mod metrics;
pub mod migrate;
pub mod networks;
pub mod openapi;
pub mod own_services;
pub mod partitions;
pub mod prune;
pub mod quota;
pub mod ratelimit;
pub mod redis;
pub mod replica;
pub mod retention_gauges;
pub mod source;
pub mod state;
pub mod status;
pub mod store;
pub mod trace;
pub mod whsec;
pub mod whsk;

#[cfg(test)]
mod props;

pub use config::Config;
pub use ids::TenantId;
pub use state::AppState;
