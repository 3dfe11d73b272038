//! The retention gauges: table sizes, the oldest rows and the pruning lag of
//! each family, the erasures pending and the sinks' log horizon, sampled by the
//! maintenance loop.

use crate::{
    db,
    prune::horizons,
    store::{erasure, retention_stats},
    AppState,
};

/// Samples the retention gauges (sizes, oldest rows, pruning lag); a failure
/// leaves them as they were. (The partition gauges are the maintenance loop's.)
pub async fn observe(state: &AppState) {
    let c = &state.config;
    let Some(list) = crate::partitions::current(state).await else { return };
    let Some((inbound_horizon, message_horizon)) = horizons(state).await else { return };
    let stats = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        let h = retention_stats::Horizons {
            inbound_default: c.retention_inbound_days,
            message_default: c.retention_message_days,
            inbound_horizon,
            message_horizon,
            idempotency_ttl: c.idempotency_ttl,
            partitions: &list,
        };
        let stats = retention_stats::stats(&**conn, &h).await?;
        Ok((stats, erasure::erasures_pending(&**conn).await?))
    })
    .await;
    // Apart, so neither stalls the other.
    let horizon = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        crate::store::sinks::horizon_age(&**conn).await
    })
    .await;
    if let Ok(age) = horizon {
        state.metrics.sink_horizon_age.set(age);
    }
    let Ok((stats, erasures)) = stats else { return };
    let m = &state.metrics;
    m.erasures_pending.set(erasures);
    for f in stats {
        m.table_rows.with_label_values(&[f.family]).set(f.rows);
        m.table_bytes.with_label_values(&[f.family]).set(f.bytes);
        if let Some(oldest) = f.oldest {
            m.retention_oldest.with_label_values(&[f.family]).set(oldest);
        }
        m.retention_overdue.with_label_values(&[f.family]).set(f.overdue);
    }
}
