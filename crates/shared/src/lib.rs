//! `hookgate-shared` owns everything that more than one side of the gateway needs:
//! prefixed ids, configuration, key derivation and secret encryption, the Postgres
//! pool and migrations, the Redis client, the metrics registry, and the stores.
//!
//! It is the only crate that writes SQL (see `docs/ARCHITECTURE.md`). Every store
//! function takes the tenant id as its first argument, so a query can never forget
//! the tenant it is acting for.

pub mod batch;
pub mod cache;
pub mod config;
pub mod crypto;
pub mod db;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod migrate;
pub mod redis;
pub mod source;
pub mod state;
pub mod status;
pub mod store;
pub mod whsec;

pub use config::Config;
pub use ids::TenantId;
pub use state::AppState;
