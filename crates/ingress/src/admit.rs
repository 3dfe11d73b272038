//! Exactly-once admission of one verified, keyed event. Async mode commits in
//! groups (`commit.rs`); sync mode, here, forwards before answering, leased.
//!
//! Invariants (`docs/guarantees.md`): a 2xx follows a commit in Postgres, by this request or an
//! earlier one; the decision is the insert; Redis is consulted only for keys it
//! was told about after their commit, and trouble with it changes nothing here.

use hookgate_egress::deliver::forward::{Event, Forwarder};
use hookgate_shared::status::InboundStatus;
use hookgate_shared::{
    db,
    ids::{InboundEventId, SourceId, TenantId},
    redis::{Redis, Script},
    store::{
        inbound_events::{self, Lease, NewInbound},
        sources::{self, Source},
        StoreError,
    },
    AppState,
};

/// Which layer knew that a copy was a duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Redis,
    Postgres,
}

impl Layer {
    pub fn label(self) -> &'static str {
        match self {
            Layer::Redis => "redis",
            Layer::Postgres => "postgres",
        }
    }
}

/// What became of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    Accepted(InboundEventId),
    Duplicate(Option<InboundEventId>, Layer),
    /// Sync mode: another copy is being forwarded right now.
    InFlight,
    /// Sync mode: an endpoint did not take it; the row is released for the retry.
    ForwardFailed,
    /// The source was deleted while the request was in flight: nothing was
    /// admitted, and the answer is the 404 its retry would get.
    SourceGone,
}

/// A keyed event ready to admit.
pub struct Candidate<'a> {
    pub source: &'a Source,
    /// The source's effective retention: its dedupe window, also Redis's.
    pub retention_days: i32,
    /// The keyed key it is admitted under.
    pub key: String,
    /// The key's plain form, while events admitted before keys were keyed may remain.
    pub plain_key: Option<String>,
    pub event_type: String,
    pub content_type: String,
    pub payload: Vec<u8>,
}

/// An inbound key's Redis key: the tenant is its hash tag, so a page of one
/// tenant's keys is one slot of a Redis Cluster.
fn redis_key(redis: &Redis, tenant: &TenantId, key: &str) -> String {
    redis.tenant_key(tenant.as_str(), &format!("in:{key}"))
}

fn duplicates_key(redis: &Redis, tenant: &TenantId, key: &str) -> String {
    redis.tenant_key(tenant.as_str(), &format!("in-dup:{key}"))
}

/// The fast path: a key Redis was told about after its commit.
pub async fn seen(redis: &Redis, tenant: &TenantId, key: &str) -> Option<InboundEventId> {
    let k = redis_key(redis, tenant, key);
    let got: Option<Option<String>> =
        redis.call(|mut c| async move { hookgate_shared::redis::cmd("GET").arg(k).query_async(&mut c).await }).await;
    // Parsed, not trusted: a value Redis lost or garbled is no answer, and Postgres decides.
    got.flatten().and_then(|s| InboundEventId::parse(&s).ok())
}

/// Counts a duplicate that Redis answered; the events API adds these counts to
/// Postgres's. Informational: a Redis flush loses them.
pub async fn count_duplicate(redis: &Redis, tenant: &TenantId, key: &str, retention_days: i32) {
    static COUNT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(COUNTED));
    let k = duplicates_key(redis, tenant, key);
    let ttl = window_secs(retention_days);
    let _: Option<i64> = redis.call(|mut c| async move { COUNT.key(k).arg(ttl).invoke_async(&mut c).await }).await;
}

/// Counts one and gives the counter its expiry if it has none, in one step
/// (a script runs whole): no failover, expiry or older release's partial write
/// leaves a counter that lives forever.
const COUNTED: &str = r"
local n = redis.call('INCR', KEYS[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
";

/// The duplicate counts Redis holds for these keys of one tenant (0 where it holds none).
pub async fn redis_duplicates(redis: &Redis, tenant: &TenantId, keys: &[String]) -> Vec<i64> {
    if keys.is_empty() || !redis.is_enabled() {
        return vec![0; keys.len()];
    }
    let ks: Vec<String> = keys.iter().map(|k| duplicates_key(redis, tenant, k)).collect();
    let got: Option<Vec<Option<i64>>> =
        redis.call(|mut c| async move { hookgate_shared::redis::cmd("MGET").arg(&ks).query_async(&mut c).await }).await;
    match got {
        Some(v) if v.len() == keys.len() => v.into_iter().map(|n| n.unwrap_or(0)).collect(),
        _ => vec![0; keys.len()],
    }
}

/// The duplicate counts Redis holds for these stored keys of one tenant (0 where
/// it holds none): for an event stored under a plain key (admitted before keys
/// were keyed), also what was counted under its keyed form since.
pub async fn stored_duplicates(state: &AppState, tenant: &TenantId, stored: &[String]) -> Vec<i64> {
    let mut counts = redis_duplicates(&state.redis, tenant, stored).await;
    match hookgate_shared::inbound_keys::keyed_forms(state, tenant, stored).await {
        Ok(keyed) if keyed != stored => {
            for (n, more) in counts.iter_mut().zip(redis_duplicates(&state.redis, tenant, &keyed).await) {
                *n += more;
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "keyed forms unknown; duplicate counts from Redis may be short"),
    }
    counts
}

/// A key committed in Postgres, to tell Redis about.
#[derive(Debug, Clone)]
pub struct Committed {
    pub tenant: TenantId,
    pub key: String,
    pub id: InboundEventId,
    pub retention_days: i32,
}

/// The dedupe window of a source's retention, in seconds (a day at least).
fn window_secs(retention_days: i32) -> u64 {
    retention_days.max(1) as u64 * 86_400
}

/// Tells Redis about one committed key, for `ttl` seconds (its window, or what
/// is left of it for a key first received earlier). Best effort.
async fn remember_for(redis: &Redis, tenant: &TenantId, key: &str, id: &InboundEventId, ttl: u64) {
    if !redis.is_enabled() {
        return;
    }
    let mut pipe = hookgate_shared::redis::pipe();
    pipe.cmd("SET").arg(redis_key(redis, tenant, key)).arg(id.as_str()).arg("EX").arg(ttl).ignore();
    let _: Option<()> = redis.call(|mut c| async move { pipe.query_async(&mut c).await }).await;
}

/// Tells Redis about a batch's committed keys: one pipeline on a single server;
/// on a Redis Cluster one per tenant (a pipeline must stay in one slot), all at
/// once. Best effort.
pub async fn remember_many(redis: &Redis, committed: &[Committed]) {
    if committed.is_empty() || !redis.is_enabled() {
        return;
    }
    let mut pipes: Vec<(&TenantId, hookgate_shared::redis::Pipeline)> = Vec::new();
    for c in committed {
        let at = match redis.is_cluster() {
            true => pipes.iter().position(|(t, _)| *t == &c.tenant),
            false => (!pipes.is_empty()).then_some(0),
        };
        let at = at.unwrap_or_else(|| {
            pipes.push((&c.tenant, hookgate_shared::redis::pipe()));
            pipes.len() - 1
        });
        let ttl = window_secs(c.retention_days);
        pipes[at].1.cmd("SET").arg(redis_key(redis, &c.tenant, &c.key)).arg(c.id.as_str()).arg("EX").arg(ttl).ignore();
    }
    let sends = pipes.into_iter().map(|(_, pipe)| async move {
        let _: Option<()> = redis.call(|mut c| async move { pipe.query_async(&mut c).await }).await;
    });
    futures_util::future::join_all(sends).await;
}

/// The `webhook-id` of a sync-mode event: derived from its key, so it is stable
/// across the provider's retries, even after a failed attempt released the row.
pub fn sync_webhook_id(key: &str) -> String {
    format!("in_{}", &key[..32.min(key.len())])
}

/// Sync mode: insert as `processing` with a lease, forward, then complete (200) or
/// release (502) so the provider's own retry drives it. Each database step is
/// bounded; the forward is bounded by the egress timeouts.
pub async fn admit_sync(state: &AppState, forwarder: &Forwarder, c: Candidate<'_>) -> Result<Admitted, StoreError> {
    let src = c.source;
    // A fresh token per request: the fence between this request and any successor.
    let lease = Lease { length: state.config.sync_lease, token: rand::random() };
    let owned = db::bounded(state.db_budget(), claim_sync(&state.db, &state.redis, lease, &c)).await?;
    // The key the event is stored under: the keyed one, or for an event a
    // request before the switch to keyed keys left `processing`, its plain one
    // (its webhook-id and Idempotency-Key stay what the first attempt sent).
    let (evt, stored) = match owned {
        Ok(owned) => owned,
        Err(answer) => return Ok(answer),
    };
    let webhook_id = sync_webhook_id(&stored);
    let ok = forwarder
        .forward(&Event {
            tenant: &src.tenant_id,
            app: &src.app_id,
            webhook_id: &webhook_id,
            event_type: &c.event_type,
            content_type: &c.content_type,
            idempotency_key: &stored,
            payload: &c.payload,
        })
        .await?;
    // Fenced by the lease's token: a request whose lease ran out while it forwarded
    // can neither complete nor release the row its successor now holds.
    let still_owner = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        if ok {
            inbound_events::complete(&**conn, &src.tenant_id, &src.id, &stored, lease.token).await
        } else {
            inbound_events::release(&**conn, &src.tenant_id, &src.id, &stored, lease.token).await
        }
    })
    .await?;
    // Not the owner any more because the source was deleted meanwhile (its events
    // with it): the answer is the 404 the retry would get.
    if !still_owner && source_gone(state, &src.tenant_id, &src.id).await {
        return Ok(Admitted::SourceGone);
    }
    match (ok, still_owner) {
        (true, true) => {
            remember_for(&state.redis, &src.tenant_id, &c.key, &evt, window_secs(c.retention_days)).await;
            Ok(Admitted::Accepted(evt))
        }
        // Forwarded, but another request owns the event now: its answer (after its
        // commit) is the one that counts, so this one says "in flight, retry".
        (true, false) => {
            tracing::info!(key = %c.key, "sync forward finished after its lease; the successor answers for it");
            Ok(Admitted::InFlight)
        }
        (false, _) => Ok(Admitted::ForwardFailed),
    }
}

/// Whether the tenant's source is deleted (false when that cannot be read now).
pub(crate) async fn source_gone(state: &AppState, tenant: &TenantId, source: &SourceId) -> bool {
    let found = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        sources::get(&**conn, tenant, source).await
    })
    .await;
    matches!(found, Ok(None))
}

/// Takes the event's `processing` row: `Ok((id, the key it is stored under))`
/// when this request owns it now, `Err(answer)` when another copy decides (done,
/// or in flight).
async fn claim_sync(
    pool: &deadpool_postgres::Pool,
    redis: &Redis,
    lease: Lease,
    c: &Candidate<'_>,
) -> Result<Result<(InboundEventId, String), Admitted>, StoreError> {
    let src = c.source;
    let new = NewInbound {
        id: InboundEventId::generate(),
        key: c.key.clone(),
        plain_key: c.plain_key.clone(),
        app_id: src.app_id.clone(),
        msg_id: None,
        event_type: c.event_type.clone(),
        content_type: c.content_type.clone(),
        payload: c.payload.clone(),
    };
    for _ in 0..2 {
        let conn = db::conn(pool).await?;
        if inbound_events::admit(&**conn, &src.tenant_id, &src.id, &new, InboundStatus::Processing, Some(lease)).await?
        {
            return Ok(Ok((new.id, new.key)));
        }
        match inbound_events::duplicate(&**conn, &src.tenant_id, &src.id, &c.key, c.plain_key.as_deref()).await? {
            // Released since our insert lost: try the insert once more.
            None => continue,
            // Done, by sync (`completed`) or by async mode before a switch (`accepted`).
            Some(e) if e.status != InboundStatus::Processing => {
                // Re-armed with what is left of the window, never a whole one: after a
                // flush Redis must not answer "duplicate" past the window Postgres keeps.
                let left = window_secs(c.retention_days) as i64 - e.age_secs;
                if left > 0 {
                    remember_for(redis, &src.tenant_id, &c.key, &e.id, left as u64).await;
                }
                return Ok(Err(Admitted::Duplicate(Some(e.id), Layer::Postgres)));
            }
            Some(e) if e.lease_expired => {
                if inbound_events::take_over(&**conn, &src.tenant_id, &src.id, &e.key, lease).await? {
                    return Ok(Ok((e.id, e.key)));
                }
                return Ok(Err(Admitted::InFlight));
            }
            Some(_) => return Ok(Err(Admitted::InFlight)),
        }
    }
    // Neither admitted nor a copy of another twice: the insert finds no source to
    // lock once the source is deleted.
    let conn = db::conn(pool).await?;
    if sources::get(&**conn, &src.tenant_id, &src.id).await?.is_none() {
        return Ok(Err(Admitted::SourceGone));
    }
    Ok(Err(Admitted::InFlight))
}
