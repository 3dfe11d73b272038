//! The Postgres stores: one module per table family, all SQL of Hookgate lives here.
//!
//! Every function takes the tenant id (or, for idempotency, the credential scope)
//! first. A row of another tenant is indistinguishable from a missing one.

/// Runs `$each(client, tenant, rows)` for every `(tenant, rows)` group of a
/// batch (`$groups`, from a `&mut` pooled client `$db`): a batch of one tenant is
/// one autocommit statement; a batch of several, one statement per tenant
/// pipelined in one transaction, so each statement names one tenant and the
/// batch commits as one. Evaluates to the groups' results, in order.
macro_rules! per_tenant {
    ($db:expr, $groups:expr, $each:path) => {{
        let groups = &$groups;
        if groups.len() == 1 {
            vec![$each(&*$db, groups[0].0, &groups[0].1).await?]
        } else {
            let tx = $db.transaction().await?;
            let parts = futures_util::future::try_join_all(groups.iter().map(|(t, rows)| $each(&tx, t, rows))).await?;
            tx.commit().await?;
            parts
        }
    }};
}

/// What a store's write tells the process's caches it made stale. The caches
/// (`crate::cache::Caches`) implement it; the stores never read them, so the
/// arrow runs from the caches to the stores whose rows they keep.
pub trait Forget {
    fn forget_source(&self, id: &crate::ids::SourceId);
    /// An application's deletion takes its sources with it.
    fn forget_sources(&self);
    /// Keys are cached by hash, not id: a revocation forgets them all.
    fn forget_keys(&self);
    fn forget_integration_keys(&self);
    fn forget_portal_tokens(&self);
    /// A tenant's change (disabled, deleted) reaches its sources and its keys.
    fn forget_tenant(&self);
}

pub mod alert_outbox;
pub mod alert_scans;
pub mod alert_settings;
pub mod alerts;
pub mod api_keys;
pub mod applications;
mod attempt_headers;
pub mod attempts;
pub mod audit;
pub mod broadcast;
pub mod broker_sources;
pub mod cancel;
pub mod counts;
pub mod deliveries;
pub mod delivery_views;
pub mod destination_ops;
pub mod endpoint_auth;
pub mod endpoint_health;
pub mod endpoint_kinds;
pub mod endpoints;
pub mod environment_imports;
pub mod erasure;
pub mod event_types;
pub mod fanout;
pub mod fifo;
pub mod fleet;
pub mod health;
pub mod idempotency;
pub mod inbound_batch;
pub mod inbound_events;
pub mod ingest_sources;
pub mod integrations;
pub mod message_stream;
pub mod messages;
pub mod notify;
pub mod operational;
pub mod page;
mod parents;
pub mod partition_export;
pub mod partition_indexes;
pub mod partitions;
pub mod poller_tokens;
pub mod poller_v2;
pub mod portal_tokens;
pub mod portals;
pub mod pressure;
pub mod publish_batch;
pub mod queues;
pub mod replay;
pub mod results;
pub mod retention;
pub mod retention_stats;
pub mod search;
pub mod sinks;
pub mod source_refusals;
pub mod sources;
pub mod statistics;
pub mod tasks;
pub mod tenants;
pub mod transformations;
pub mod type_schedules;
pub mod usage;
pub mod volume;
pub mod wakes;

mod error;
pub use error::StoreError;
