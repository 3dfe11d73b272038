//! Enforcing tenants' quotas: the quotas in effect (cached for a second), the
//! rate checks, the daily message cap, and the usage tallies of what commits
//! nothing (refused requests, duplicates caught by Redis).

use std::{collections::HashMap, sync::Mutex, time::Duration};

use chrono::Utc;

use crate::{
    db,
    ids::TenantId,
    quota::{Exceeded, Limit, Quotas},
    ratelimit::RateLimiter,
    redis::Redis,
    store::{
        tenants,
        usage::{self, Counter, Tally},
        StoreError,
    },
    AppState,
};

/// How often tallied usage is written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub struct Limits {
    rate: RateLimiter,
    tally: Mutex<HashMap<Tally, i64>>,
    /// A batch whose write failed, with its id: written again as it was, under
    /// the same id, before anything newer (its statement may have committed
    /// after all, and then the id makes the retry add nothing).
    unsure: tokio::sync::Mutex<Option<Batch>>,
}

/// Tallies written together, with the id their statement records.
type Batch = (String, Vec<(Tally, i64)>);

impl Limits {
    pub fn new(redis: Redis) -> Self {
        Limits { rate: RateLimiter::new(redis), tally: Mutex::new(HashMap::new()), unsure: Default::default() }
    }

    /// One event of `tenant` under a rate of Hookgate's own (no quota names it):
    /// `per_sec` a second in the bucket `bucket`, a burst of as many; `None` to
    /// admit it, else how long until one is admitted.
    pub async fn own_rate(&self, tenant: &TenantId, bucket: &str, per_sec: u64) -> Option<Duration> {
        self.rate.check(tenant.as_str(), bucket, per_sec).await
    }

    /// Counts one of what commits nothing, for the next [`flush`](Self::flush).
    pub fn tally(&self, tenant: &TenantId, counter: Counter) {
        let key = Tally { tenant_id: tenant.clone(), day: Utc::now().date_naive(), counter };
        *self.tally.lock().expect("tally lock is never poisoned").entry(key).or_default() += 1;
    }

    /// Writes the tallies; on failure they are kept for the next try. A batch
    /// that failed is written again first, as it was and under its id; until it
    /// is, newer tallies wait beside it (so at most one batch is ever unsure).
    pub async fn flush(&self, state: &AppState) -> Result<(), StoreError> {
        let mut unsure = self.unsure.lock().await;
        if let Some((batch, counts)) = unsure.as_ref() {
            write(state, batch, counts).await?;
            *unsure = None;
        }
        let counts: Vec<(Tally, i64)> =
            std::mem::take(&mut *self.tally.lock().expect("tally lock is never poisoned")).into_iter().collect();
        if counts.is_empty() {
            return Ok(());
        }
        // Unsure from before its write begins: a flush cut off midway (the process
        // stopping) leaves it for the shutdown's flush, under the same id.
        let (batch, counts) = unsure.insert((ulid::Ulid::new().to_string(), counts));
        write(state, batch, counts).await?;
        *unsure = None;
        Ok(())
    }
}

/// One batch of tallies, in one statement: all of it or none, and once.
async fn write(state: &AppState, batch: &str, counts: &[(Tally, i64)]) -> Result<(), StoreError> {
    db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        usage::add(&**conn, batch, counts).await
    })
    .await
}

/// The tenant's quotas in effect: its own over the operator's defaults. A tenant
/// not found (deleted, disabled) gets the defaults; its requests are refused
/// elsewhere.
pub async fn quotas(state: &AppState, tenant: &TenantId) -> Result<Quotas, StoreError> {
    if let Some(q) = state.caches.quotas.get(tenant) {
        return Ok(q);
    }
    let own = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        tenants::quotas(&**conn, tenant).await
    })
    .await?
    .unwrap_or_default();
    let q = own.over(&state.config.quotas);
    state.caches.quotas.insert(tenant.clone(), q);
    Ok(q)
}

/// One event of `tenant` under a per-second `limit`, if the quota has one.
pub async fn rate(state: &AppState, tenant: &TenantId, quotas: &Quotas, limit: Limit) -> Result<(), Exceeded> {
    rate_in(state, tenant, quotas, limit, limit.label()).await
}

/// [`rate`] in a bucket of the tenant's own (`bucket` names it).
pub async fn rate_in(
    state: &AppState,
    tenant: &TenantId,
    quotas: &Quotas,
    limit: Limit,
    bucket: &str,
) -> Result<(), Exceeded> {
    let Some(value) = quotas.limit(limit) else { return Ok(()) };
    match state.limits.rate.check(tenant.as_str(), bucket, value).await {
        None => Ok(()),
        Some(wait) => Err(refused(state, tenant, Exceeded { limit, value, retry_after: wait })),
    }
}

/// Counts a refusal in `hookgate_quota_rejections_total`, and hands it back.
pub fn refused(state: &AppState, tenant: &TenantId, e: Exceeded) -> Exceeded {
    state.metrics.quota_rejections.with_label_values(&[state.metrics.tenant(tenant.as_str()), e.limit.label()]).inc();
    e
}

/// Writes the tallies every [`FLUSH_EVERY`] until the process stops.
pub async fn flush_loop(state: AppState) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = state.limits.flush(&state).await {
            tracing::warn!(error = %e, "usage tallies not written; kept for the next try");
        }
    }
}
