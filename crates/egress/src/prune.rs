//! Removes messages past their tenant's retention, with their deliveries and
//! attempts, and drops payloads past their own `payloadRetentionPeriod`.

use hookgate_shared::{
    prune::{drain, BATCH},
    store::retention,
    AppState,
};

pub async fn run(state: AppState) {
    let mut tick = tokio::time::interval(state.config.prune_interval);
    let default_days = state.config.retention_message_days;
    loop {
        tick.tick().await;
        drain(&state, "payloads", |conn| async move { retention::expire_payloads(&**conn, BATCH).await }).await;
        drain(&state, "messages", |conn| async move { retention::prune_messages(&**conn, default_days, BATCH).await })
            .await;
    }
}
