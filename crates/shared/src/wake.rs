//! Waking delivery workers after a commit, without serialising commits.
//!
//! A `NOTIFY` inside a transaction takes a database-wide lock at commit and holds
//! it across the WAL flush, so every notifying commit waits for the one before it:
//! group commit in Postgres stops. Instead, committers poke this handle after
//! their commit: it wakes workers in this process at once, and sends at most one
//! `NOTIFY` at a time, in its own tiny transaction, for workers elsewhere. Workers
//! also poll, so a lost wake-up costs latency, never a delivery.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc, Once,
};

use tokio::sync::Notify;

use crate::store::messages::NOTIFY_CHANNEL;

#[derive(Clone)]
pub struct Wake {
    inner: Arc<Inner>,
}

struct Inner {
    pool: deadpool_postgres::Pool,
    local: Arc<Notify>,
    kick: Notify,
    pending: AtomicBool,
    started: Once,
}

impl Wake {
    pub fn new(pool: deadpool_postgres::Pool) -> Self {
        Wake {
            inner: Arc::new(Inner {
                pool,
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
        if let Ok(conn) = inner.pool.get().await {
            if let Err(e) = conn.execute("SELECT pg_notify($1, '')", &[&NOTIFY_CHANNEL]).await {
                tracing::debug!(error = %e, "NOTIFY failed; workers elsewhere will poll");
            }
        }
    }
}
