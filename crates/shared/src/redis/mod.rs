//! The Redis client: a fast, optional helper that degrades instead of failing requests.
//! A single server, a Sentinel-watched master or a Redis Cluster, over TLS or not ([`conn`]).
//!
//! Nothing that must be correct depends on Redis. Every call has a short timeout;
//! a failure counts in `hookgate_redis_errors_total` and returns `None`, and the
//! caller falls back to Postgres. While Redis is down, reconnects are attempted at
//! most once a second so that requests do not each pay a connect timeout.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use prometheus::IntCounter;
pub use redis::{cmd, pipe, Pipeline, RedisResult, Script};
use tokio::sync::Mutex;

mod conn;

use conn::Connector;
pub use conn::{Conn, RedisTarget};

const RECONNECT_EVERY: Duration = Duration::from_secs(1);

/// The state reported by `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisState {
    Disabled,
    Up,
    Down,
}

/// A handle to Redis, or to nothing when `REDIS_URL` is unset. Cheap to clone.
#[derive(Clone)]
pub struct Redis {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    connector: Connector,
    cluster: bool,
    prefix: String,
    timeout: Duration,
    errors: IntCounter,
    conn: Mutex<Connection>,
}

enum Connection {
    Ready(Conn),
    Failed(Instant),
    Never,
}

impl Redis {
    /// A Redis handle; `url: None` gives one whose every call returns `None`.
    pub fn new(target: Option<&RedisTarget>, prefix: &str, timeout: Duration, errors: IntCounter) -> RedisResult<Self> {
        let Some(target) = target else {
            return Ok(Self { inner: None });
        };
        let connector = Connector::new(target, timeout)?;
        let inner = Inner {
            connector,
            cluster: target.cluster,
            prefix: prefix.to_owned(),
            timeout,
            errors,
            conn: Mutex::new(Connection::Never),
        };
        Ok(Self { inner: Some(Arc::new(inner)) })
    }

    /// Whether this is a Redis Cluster: a pipeline must then stay within one hash
    /// slot, so callers batch per tenant ([`Redis::tenant_key`]).
    pub fn is_cluster(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.cluster)
    }

    pub fn disabled() -> Self {
        Self { inner: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// A key under this deployment's prefix.
    pub fn key(&self, suffix: &str) -> String {
        match &self.inner {
            Some(i) => format!("{}{suffix}", i.prefix),
            None => suffix.to_owned(),
        }
    }

    /// A key of one tenant's: the tenant id is its hash tag, so that every key of a
    /// tenant lives in one slot of a Redis Cluster and multi-key commands and
    /// pipelines over them are allowed.
    pub fn tenant_key(&self, tenant: &str, suffix: &str) -> String {
        self.key(&format!("{{{tenant}}}:{suffix}"))
    }

    /// Runs one call with the timeout; `None` when Redis is disabled, down or slow.
    pub async fn call<T, F, Fut>(&self, f: F) -> Option<T>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let inner = self.inner.as_ref()?;
        let conn = inner.connection().await?;
        let reconnects_itself = conn.reconnects_itself();
        let (failed, lost) = match tokio::time::timeout(inner.timeout, f(conn)).await {
            Ok(Ok(v)) => return Some(v),
            Ok(Err(e)) => (e.to_string(), lost_master(&e)),
            Err(_) => ("timed out".to_owned(), true),
        };
        inner.errors.inc();
        tracing::debug!(error = %failed, "redis call failed");
        if lost && !reconnects_itself {
            // A master that failed over (or went away): the next call, after the
            // reconnect pause, asks the Sentinels where the master is now.
            *inner.conn.lock().await = Connection::Failed(Instant::now());
        }
        None
    }

    /// Pings Redis for `/readyz`.
    pub async fn state(&self) -> RedisState {
        if self.inner.is_none() {
            return RedisState::Disabled;
        }
        let pong: Option<String> = self.call(|mut c| async move { redis::cmd("PING").query_async(&mut c).await }).await;
        if pong.is_some() {
            RedisState::Up
        } else {
            RedisState::Down
        }
    }
}

/// Whether an error says the connection no longer reaches a writable master: it
/// dropped, or the server it reaches became a replica (`READONLY`).
fn lost_master(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || e.code() == Some("READONLY")
}

impl Inner {
    async fn connection(&self) -> Option<Conn> {
        let mut guard = self.conn.lock().await;
        match &*guard {
            Connection::Ready(c) => return Some(c.clone()),
            Connection::Failed(at) if at.elapsed() < RECONNECT_EVERY => return None,
            _ => {}
        }
        let connect = self.connector.connect(self.timeout);
        match tokio::time::timeout(self.timeout * 2, connect).await {
            Ok(Ok(c)) => {
                *guard = Connection::Ready(c.clone());
                Some(c)
            }
            result => {
                self.errors.inc();
                if !matches!(&*guard, Connection::Failed(_)) {
                    let reason = match result {
                        Ok(Err(e)) => e.to_string(),
                        _ => "connect timed out".to_owned(),
                    };
                    tracing::warn!(%reason, "redis unreachable; deciding from Postgres alone");
                }
                *guard = Connection::Failed(Instant::now());
                None
            }
        }
    }
}
