//! Wakes the worker when a commit adds deliveries (`LISTEN hookgate_deliveries`);
//! polling remains the fallback, so a lost notification only costs latency.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use hookgate_shared::store::messages::NOTIFY_CHANNEL;
use tokio::sync::{mpsc, Notify};
use tokio_postgres::{AsyncMessage, NoTls};

pub async fn listen(url: String, wake: Arc<Notify>) {
    loop {
        if let Err(e) = listen_once(&url, &wake).await {
            tracing::debug!(error = %e, "delivery LISTEN connection lost; polling until it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_once(url: &str, wake: &Notify) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // The connection must be polled for the LISTEN to complete and for
    // notifications to arrive; a task drives it and forwards notifications.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(_) = m {
                let _ = tx.send(());
            }
        }
    });
    client.batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}")).await?;
    // Catch up on anything committed before LISTEN took effect.
    wake.notify_one();
    while rx.recv().await.is_some() {
        wake.notify_one();
    }
    driver.abort();
    Ok(())
}
