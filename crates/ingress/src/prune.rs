//! Ends the dedupe window of inbound keys past their retention (their source's,
//! else their tenant's, else the operator's default), and removes the events of
//! sources whose retention is shorter than the longest (the rest go with their
//! partitions).

use hookgate_shared::{
    prune::{drain, BATCH},
    store::retention,
    AppState,
};

pub async fn run(state: AppState) {
    let mut tick = hookgate_shared::prune::ticks(&state);
    let default_days = state.config.retention_inbound_days;
    loop {
        tick.tick().await;
        drain(&state, "inbound_keys", |conn| async move {
            retention::prune_inbound_keys(&**conn, default_days, BATCH).await
        })
        .await;
        if let Some((horizon, _)) = hookgate_shared::prune::horizons(&state).await {
            drain(&state, "inbound_events", |mut conn| async move {
                retention::prune_inbound_events(&mut **conn, default_days, horizon, BATCH).await
            })
            .await;
        }
    }
}
