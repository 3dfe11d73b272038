//! Removes inbound events past their retention (their source's, else their
//! tenant's, else the operator's default), which is also their dedupe window.

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
        drain(
            &state,
            "inbound_events",
            |conn| async move { retention::prune_inbound(&**conn, default_days, BATCH).await },
        )
        .await;
    }
}
