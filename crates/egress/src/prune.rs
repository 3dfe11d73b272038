//! Removes messages past a tenant's retention shorter than the longest (the rest
//! go with their partitions), with their deliveries and attempts; drops payloads
//! past their own `payloadRetentionPeriod`; forgets the request keys of messages
//! past the Idempotency-Key's lifetime; folds past days' usage shards into one
//! row each; forgets background tasks that ended longer ago than the message
//! retention; keeps the audit log as long as each tenant's messages; and finishes the erasures of applications that their request could
//! not complete.

use hookgate_shared::{
    db,
    ids::{AppId, TenantId},
    prune::{drain, BATCH, ROUND},
    store::{
        audit,
        erasure::{self, Erasure},
        portal_tokens, retention, sinks, tasks, usage,
    },
    AppState,
};

pub async fn run(state: AppState) {
    let mut tick = hookgate_shared::prune::ticks(&state);
    let default_days = state.config.retention_message_days;
    let ttl = state.config.idempotency_ttl;
    loop {
        tick.tick().await;
        drain(&state, "payloads", |mut conn| async move { retention::expire_payloads(&mut **conn, BATCH).await }).await;
        if let Some((_, horizon)) = hookgate_shared::prune::horizons(&state).await {
            drain(&state, "messages", |mut conn| async move {
                retention::prune_messages(&mut **conn, default_days, horizon, BATCH).await
            })
            .await;
        }
        drain(&state, "request_keys", |conn| async move { retention::prune_request_keys(&**conn, ttl, BATCH).await })
            .await;
        // Not a removal: past days' usage shards folded into one row each, sums kept.
        drain(&state, "usage_shards", |conn| async move { usage::compact(&**conn, BATCH).await }).await;
        drain(&state, "usage_flushes", |conn| async move { usage::forget_flushes(&**conn).await }).await;
        // Ended background tasks are kept as long as the operator's message retention.
        drain(&state, "background_tasks", |conn| async move { tasks::prune_ended(&**conn, default_days, BATCH).await })
            .await;
        // Portal-token revocations, once no token they refuse can be alive.
        let now_ms = chrono::Utc::now().timestamp_millis();
        drain(&state, "portal_revocations", |conn| async move { portal_tokens::prune(&**conn, now_ms, BATCH).await })
            .await;
        // The FIFO and polling endpoints' log, as long as each tenant's message retention.
        drain(&state, "sink_log", |conn| async move { sinks::prune(&**conn, default_days, BATCH).await }).await;
        // The audit log, as long as each tenant's message retention.
        drain(&state, "audit_log", |conn| async move { audit::prune(&**conn, default_days, BATCH).await }).await;
        let pending = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            erasure::pending_erasures(&**conn, 100).await
        })
        .await;
        for (tenant, app) in pending.unwrap_or_default() {
            erase(&state, &tenant, &app).await;
        }
    }
}

/// Erases one application, a bounded step at a time, for at most a round's
/// worth of steps; the rest (and an error) is left to the next round.
async fn erase(state: &AppState, tenant: &TenantId, app: &AppId) {
    for _ in 0..ROUND {
        let step = db::bounded(state.db_budget(), async {
            let mut conn = db::conn(&state.db).await?;
            erasure::erase_step(&mut **conn, tenant, app, BATCH, &state.caches).await
        })
        .await;
        match step {
            Ok(Erasure::Progress(n)) => state.metrics.pruned_rows.with_label_values(&["erasures"]).inc_by(n),
            Ok(Erasure::Done) => {
                tracing::info!(%tenant, %app, "application erased");
                return;
            }
            Err(e) => {
                tracing::debug!(%tenant, %app, error = %e, "erasure postponed");
                return;
            }
        }
    }
}
