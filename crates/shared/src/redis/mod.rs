//! The Redis client: a fast, optional helper that degrades instead of failing requests.
//! A single server, a Sentinel-watched master or a Redis Cluster, over TLS or not ([`conn`]).
//!
//! Nothing that must be correct depends on Redis. Every call has a short timeout;
//! a failure counts in `hookgate_redis_errors_total` and returns `None`, and the
//! caller falls back to Postgres. While Redis is down, reconnects are attempted at
//! most once a second so that requests do not each pay a connect timeout.

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU32, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use prometheus::IntCounter;
pub use redis::{cmd, pipe, Pipeline, RedisResult, Script};

mod conn;
mod sentinel;

use conn::Connector;
pub use conn::{Conn, RedisTarget};

const RECONNECT_EVERY: Duration = Duration::from_secs(1);
/// Under Sentinel, how often the Sentinels are asked whether the master moved,
/// for a failover that no failed call shows (the old master still answers).
const SENTINEL_CHECK_EVERY: Duration = Duration::from_secs(5);
/// Under Sentinel, timeouts in a row that drop the connection: one slow call is
/// slowness, several in a row a master that went away without a reset.
const TIMEOUTS_TO_RECONNECT: u32 = 3;

/// The state reported by `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
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
    /// Held only to read or swap the state, never across an await.
    conn: Mutex<Connection>,
    /// One connect at a time; callers that find one under way wait for it at most
    /// one call's timeout, then do without Redis.
    connecting: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    timeouts_in_a_row: AtomicU32,
}

enum Connection {
    Ready(Ready),
    Failed(Instant),
    Never,
}

struct Ready {
    conn: Conn,
    /// Which connect made it: a late failure of an older one leaves it alone.
    generation: u64,
    /// Under Sentinel, the master it reaches and when the Sentinels were last asked.
    master: Option<(String, u16)>,
    checked: Instant,
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
            connecting: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            timeouts_in_a_row: AtomicU32::new(0),
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
        let (conn, generation) = Inner::connection(inner).await?;
        let reconnects_itself = conn.reconnects_itself();
        let (failed, lost) = match tokio::time::timeout(inner.timeout, f(conn)).await {
            Ok(Ok(v)) => {
                if inner.timeouts_in_a_row.load(Ordering::Relaxed) != 0 {
                    inner.timeouts_in_a_row.store(0, Ordering::Relaxed);
                }
                return Some(v);
            }
            Ok(Err(e)) => (e.to_string(), lost_master(&e)),
            Err(_) => {
                let n = inner.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
                ("timed out".to_owned(), n >= TIMEOUTS_TO_RECONNECT)
            }
        };
        inner.errors.inc();
        tracing::debug!(error = %failed, "redis call failed");
        if lost && !reconnects_itself {
            // A master that failed over (or went away): the next call, after the
            // reconnect pause, asks the Sentinels where the master is now.
            inner.drop_connection(generation);
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
/// dropped or was refused, or the server it reaches is a replica now (`READONLY`,
/// also inside a script's error) or cannot take writes (`MASTERDOWN`,
/// `NOREPLICAS`). Other errors (a wrong type, a value that does not parse) say
/// nothing about the master and keep the connection. Timeouts count apart.
fn lost_master(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return true;
    }
    let text = e.to_string();
    ["READONLY", "MASTERDOWN", "NOREPLICAS"].iter().any(|code| e.code() == Some(code) || text.contains(code))
}

/// Why there is no connection to use now.
enum NotReady {
    /// A connect failed less than [`RECONNECT_EVERY`] ago.
    Pause,
    /// Never connected, or the pause is over.
    Connect,
}
use NotReady::{Connect, Pause};

impl Inner {
    /// The connection, connecting first if there is none and no connect is under
    /// way; `None` (Postgres decides) while Redis is away or another call connects.
    async fn connection(this: &Arc<Inner>) -> Option<(Conn, u64)> {
        match this.ready() {
            Ok(ready) => return Some(ready),
            Err(Pause) => return None,
            Err(Connect) => {}
        }
        // A connect under way is waited for, at most one call's timeout: its
        // callers then use Redis too, rather than decide apart from it (a throttle
        // decided half in Redis and half locally would admit more than its rate).
        let _connecting = match this.connecting.try_lock() {
            Ok(guard) => guard,
            Err(_) => match tokio::time::timeout(this.timeout, this.connecting.lock()).await {
                Ok(guard) => guard,
                Err(_) => return None,
            },
        };
        // Another call may have connected (or failed to) while this one came here.
        match this.ready() {
            Ok(ready) => return Some(ready),
            Err(Pause) => return None,
            Err(Connect) => {}
        }
        let result = tokio::time::timeout(this.timeout * 2, this.connector.connect(this.timeout)).await;
        let mut state = this.conn.lock().expect("redis state lock");
        match result {
            Ok(Ok((conn, master))) => {
                let generation = this.generation.fetch_add(1, Ordering::Relaxed) + 1;
                this.timeouts_in_a_row.store(0, Ordering::Relaxed);
                *state = Connection::Ready(Ready { conn: conn.clone(), generation, master, checked: Instant::now() });
                Some((conn, generation))
            }
            result => {
                this.errors.inc();
                if !matches!(&*state, Connection::Failed(_)) {
                    let reason = match result {
                        Ok(Err(e)) => e.to_string(),
                        _ => "connect timed out".to_owned(),
                    };
                    tracing::warn!(%reason, "redis unreachable; deciding from Postgres alone");
                }
                *state = Connection::Failed(Instant::now());
                None
            }
        }
    }

    /// The ready connection, or whether to connect now; under Sentinel, every few
    /// seconds, also starts asking the Sentinels in the background whether the
    /// master moved.
    fn ready(self: &Arc<Inner>) -> Result<(Conn, u64), NotReady> {
        let mut state = self.conn.lock().expect("redis state lock");
        match &mut *state {
            Connection::Ready(r) => {
                if let Some(master) = r.master.clone().filter(|_| r.checked.elapsed() >= SENTINEL_CHECK_EVERY) {
                    r.checked = Instant::now();
                    let (inner, generation) = (self.clone(), r.generation);
                    tokio::spawn(async move {
                        if inner.connector.master_moved(&master, inner.timeout).await {
                            tracing::info!("the Sentinels name a new master; reconnecting");
                            inner.drop_connection(generation);
                        }
                    });
                }
                Ok((r.conn.clone(), r.generation))
            }
            Connection::Failed(at) if at.elapsed() < RECONNECT_EVERY => Err(Pause),
            _ => Err(Connect),
        }
    }

    /// Drops the connection `generation` made, unless a newer one replaced it.
    fn drop_connection(&self, generation: u64) {
        let mut state = self.conn.lock().expect("redis state lock");
        if matches!(&*state, Connection::Ready(r) if r.generation == generation) {
            *state = Connection::Failed(Instant::now());
        }
    }
}
