//! Waking delivery workers after a commit (`NOTIFY`) and listening for it
//! (`LISTEN`), without serialising commits.
//!
//! A `NOTIFY` inside a transaction takes a database-wide lock at commit and holds
//! it across the WAL flush, so every notifying commit waits for the one before it:
//! group commit in Postgres stops. Instead, committers poke this handle after
//! their commit: it wakes workers in this process at once, and sends at most one
//! `NOTIFY` at a time, in its own tiny transaction, for workers elsewhere. Workers
//! also poll, so a lost wake-up costs latency, never a delivery.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Once,
    },
    time::Duration,
};

use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio_postgres::AsyncMessage;

/// The channel workers LISTEN on; [`Wake`] notifies it after commits.
pub const NOTIFY_CHANNEL: &str = "hookgate_deliveries";

#[derive(Clone)]
pub struct Wake {
    inner: Arc<Inner>,
}

struct Inner {
    pool: deadpool_postgres::Pool,
    /// Bound of one NOTIFY: a stalled database must not hold the notifier.
    budget: Duration,
    local: Arc<Notify>,
    kick: Notify,
    pending: AtomicBool,
    started: Once,
}

impl Wake {
    pub fn new(pool: deadpool_postgres::Pool, budget: Duration) -> Self {
        Wake {
            inner: Arc::new(Inner {
                pool,
                budget,
                local: Arc::new(Notify::new()),
                kick: Notify::new(),
                pending: AtomicBool::new(false),
                started: Once::new(),
            }),
        }
    }

    /// What this process's workers wait on.
    pub fn local(&self) -> Arc<Notify> {
        self.inner.local.clone()
    }

    /// Call after committing deliveries. Cheap; coalesces bursts into one NOTIFY.
    pub fn poke(&self) {
        self.inner.local.notify_waiters();
        self.inner.local.notify_one();
        let inner = self.inner.clone();
        self.inner.started.call_once(move || {
            tokio::spawn(notifier(inner));
        });
        if !self.inner.pending.swap(true, Ordering::AcqRel) {
            self.inner.kick.notify_one();
        }
    }
}

async fn notifier(inner: Arc<Inner>) {
    loop {
        inner.kick.notified().await;
        inner.pending.store(false, Ordering::Release);
        let sent = crate::db::bounded(inner.budget, async {
            let conn = crate::db::conn(&inner.pool).await?;
            conn.execute("SELECT pg_notify($1, '')", &[&NOTIFY_CHANNEL]).await?;
            Ok(())
        })
        .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "NOTIFY failed; workers elsewhere will poll");
        }
    }
}

/// Wakes `wake` whenever a commit anywhere adds deliveries; reconnects forever.
/// Polling remains the fallback, so a lost notification only costs latency.
pub async fn listen(url: String, wake: Arc<Notify>) {
    loop {
        if let Err(e) = listen_once(&url, &wake).await {
            tracing::debug!(error = %e, "delivery LISTEN connection lost; polling until it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_once(url: &str, wake: &Notify) -> Result<(), crate::store::StoreError> {
    let (client, mut connection) = crate::db::connect(url).await?;
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
