//! The Postgres connection pool, and the bounds on every wait for Postgres: a down
//! or stalled database answers fast instead of hanging requests.

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        OnceLock,
    },
    time::{Duration, Instant},
};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use deadpool_postgres::{Client, Transaction};

use crate::store::StoreError;

pub mod hosts;
pub mod tls;

/// A single connection's driver, as [`connect`] returns it.
pub type Connection = tokio_postgres::Connection<
    tokio_postgres::Socket,
    <MakeRustlsConnect as MakeTlsConnect<tokio_postgres::Socket>>::Stream,
>;

/// Parses `DATABASE_URL` with its TLS settings into a config and a connector.
pub fn target(url: &str) -> Result<(tokio_postgres::Config, MakeRustlsConnect), StoreError> {
    let (url, settings) = tls::split(url)?;
    let mut pg: tokio_postgres::Config = url.parse().map_err(StoreError::Config)?;
    pg.ssl_mode(settings.mode);
    Ok((pg, tls::connector(&settings)?))
}

/// One connection outside the pool (migrations' advisory lock, the worker's
/// LISTEN, partition maintenance), with the same TLS as the pool's, within
/// `timeout` for each host of the URL.
pub async fn connect(url: &str, timeout: Duration) -> Result<(tokio_postgres::Client, Connection), StoreError> {
    let (mut pg, tls) = target(url)?;
    pg.connect_timeout(timeout);
    pg.application_name(crate::migrate::application_name(pg.get_application_name()));
    // As the pool's: a connection whose server vanished ends, rather than waits for hours.
    keepalives(&mut pg, timeout);
    let hosts = hosts::Hosts::new(url, &pg, timeout);
    match tokio::time::timeout(timeout * hosts.len() as u32, hosts.connect(&tls)).await {
        Ok(connected) => connected.map_err(StoreError::from),
        Err(_) => Err(StoreError::TimedOut(format!("no Postgres host answered within {timeout:?}"))),
    }
}

/// Connects to each host of `url` on its own, within `timeout` each, and lets
/// go again: what each answered, by host and port, for the checks at start (a
/// TLS setting one standby refuses must not wait for the failover to show).
pub async fn try_each_host(url: &str, timeout: Duration) -> Result<Vec<(String, Result<(), StoreError>)>, StoreError> {
    let (mut pg, tls) = target(url)?;
    pg.connect_timeout(timeout);
    let mut answers = Vec::new();
    for one in hosts::each(&pg) {
        let answer = match tokio::time::timeout(timeout, one.connect(tls.clone())).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(StoreError::from(e)),
            Err(_) => Err(StoreError::TimedOut(format!("no answer within {timeout:?}"))),
        };
        answers.push((hosts::describe(&one), answer));
    }
    Ok(answers)
}

/// How a pool's connections plan the statements they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plans {
    /// Postgres's choice: a plan for each run's values until a generic plan looks
    /// no dearer. Right for queries written for one request's values.
    Chosen,
    /// One generic plan per prepared statement, made once per connection. For the
    /// delivery worker, whose claim and recorder run the same statements over
    /// batches of arrays: left to choose, Postgres planned them afresh on every
    /// run (a plan for one batch's values prunes partitions when it is made, so it
    /// always looked cheaper than the generic plan, which prunes the same
    /// partitions when it starts), and that planning was 40 % of its time while
    /// delivering (docs/performance.md). It applies to every statement run with
    /// parameters on these connections, so their index and partition-key
    /// conditions must not depend on a plan made for the values (no `$n IS NULL
    /// OR …` around an index condition: such a filter then reads every row). Its
    /// plans join by index lookups only (hash and merge joins and sequential scans
    /// off, where an index can serve): see [`pool`].
    Generic,
}

/// Builds the pool; no connection is made until the first query, so a process can
/// start while Postgres is down and become ready when it returns.
///
/// `timeout` bounds connecting and waiting for a pooled connection; `statement`
/// is sent as `statement_timeout` (a query stuck on a lock ends), and TCP
/// keepalives and a user timeout drop a connection whose peer vanished.
pub fn pool(url: &str, size: usize, timeout: Duration, statement: Duration, plans: Plans) -> Result<Pool, StoreError> {
    let (pg, tls) = target(url)?;
    pool_of(url, pg, tls, size, timeout, statement, plans)
}

/// One pool per host of `url`, each named by its host and port: for replicas,
/// each read and checked on its own (a pool over several hosts would read
/// whichever it reached, unchecked).
pub fn pools_per_host(
    url: &str,
    size: usize,
    timeout: Duration,
    statement: Duration,
) -> Result<Vec<(String, Pool)>, StoreError> {
    let (pg, tls) = target(url)?;
    let mut pools = Vec::new();
    for (i, one) in hosts::each(&pg).into_iter().enumerate() {
        let name = hosts::describe(&one);
        pools.push((name, pool_of(&format!("{url}#{i}"), one, tls.clone(), size, timeout, statement, Plans::Chosen)?));
    }
    Ok(pools)
}

fn pool_of(
    url: &str,
    mut pg: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    size: usize,
    timeout: Duration,
    statement: Duration,
    plans: Plans,
) -> Result<Pool, StoreError> {
    pg.connect_timeout(timeout);
    // The schema level this release knows, for a contract to see who is connected.
    pg.application_name(crate::migrate::application_name(pg.get_application_name()));
    // A session idle in a transaction past twice the statement bound is ended by
    // Postgres: a client cut off mid-transaction cannot hold its locks for hours.
    let ms = statement.as_millis();
    let mut options =
        format!("-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={}", ms * 2);
    if plans == Plans::Generic {
        // Joins by lookup, never by hashing, merging or reading whole partitions: a
        // generic plan is made once, from the statistics of the moment, and kept. Made
        // over a fresh day's partition (a few rows), the recorder's plans read the
        // whole partition for every batch (a hash join over a sequential scan), a
        // cost that grew with each row written until autovacuum analyzed it again.
        // The joins of one statement's own results (CTEs) become nested loops too:
        // bounded here by the worker's batch, which is why group commit, whose
        // fan-out can join tens of thousands of rows so, does not use this pool.
        options += " -c plan_cache_mode=force_generic_plan -c enable_hashjoin=off -c enable_mergejoin=off";
        options += " -c enable_seqscan=off";
    }
    let options = match pg.get_options() {
        Some(given) => format!("{given} {options}"),
        None => options,
    };
    pg.options(options);
    keepalives(&mut pg, timeout);
    let hosts = hosts::Hosts::new(url, &pg, timeout);
    // Every host gets its turn within the bound on making a connection.
    let create = timeout * hosts.len() as u32;
    let connect = Failover { hosts, tls };
    let manager = Manager::from_connect(pg, connect, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .pre_recycle(deadpool_postgres::Hook::async_fn(move |client, metrics| {
            Box::pin(async move { verify_after_stall(client, metrics, timeout).await })
        }))
        .wait_timeout(Some(timeout))
        .create_timeout(Some(create))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|e| StoreError::Pool(e.to_string()))
}

/// TCP keepalives and a user timeout: a connection whose peer vanished (a
/// machine gone, a network cut) ends within about half a minute.
fn keepalives(pg: &mut tokio_postgres::Config, timeout: Duration) {
    pg.keepalives(true).keepalives_idle(Duration::from_secs(15)).keepalives_interval(Duration::from_secs(5));
    pg.keepalives_retries(3).tcp_user_timeout(timeout.max(Duration::from_secs(10)));
}

/// The pool's way to connect: to whichever host of the URL takes writes, the
/// one that last did first ([`hosts`]).
struct Failover {
    hosts: hosts::Hosts,
    tls: MakeRustlsConnect,
}

impl deadpool_postgres::Connect for Failover {
    fn connect(
        &self,
        _: &tokio_postgres::Config,
    ) -> std::pin::Pin<
        Box<
            dyn Future<Output = Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>>
                + Send
                + '_,
        >,
    > {
        Box::pin(async move {
            let (client, connection) = self.hosts.connect(&self.tls).await?;
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(error = %e, "a Postgres connection ended");
                }
            });
            Ok((client, driver))
        })
    }
}

/// Forgets every connection's prepared statements when `e` says one went stale.
/// The hot statements are prepared once per connection; a schema change that
/// alters what one returns makes it fail on every later run ("cached plan must
/// not change result type") until it is prepared again, which this brings about
/// for the retry that follows.
pub fn forget_stale_plans(pool: &Pool, e: &StoreError) {
    use tokio_postgres::error::SqlState;
    let StoreError::Db(e) = e else { return };
    if e.code().is_some_and(|c| *c == SqlState::FEATURE_NOT_SUPPORTED || *c == SqlState::INVALID_SQL_STATEMENT_NAME) {
        tracing::warn!(error = %e, "a prepared statement went stale; preparing every statement afresh");
        pool.manager().statement_caches.clear();
    }
}

/// Takes a connection from the pool.
pub async fn conn(pool: &Pool) -> Result<Client, StoreError> {
    pool.get().await.map_err(StoreError::from)
}

/// Bounds one piece of database work: past `limit` it ends as `Unavailable`.
///
/// A stalled Postgres (paused, or cut off behind a network that still
/// acknowledges) leaves its connections open and answers nothing, and neither
/// `statement_timeout` (enforced by the stalled server) nor TCP timeouts (the
/// kernel still acknowledges) end the wait: only a timer on this side does. The
/// abandoned work is dropped; a transaction it held is rolled back by Postgres.
pub async fn bounded<T>(limit: Duration, work: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, work).await {
        Ok(done) => done,
        Err(_) => {
            note_stall();
            Err(StoreError::TimedOut(format!("no answer from Postgres within {limit:?}")))
        }
    }
}

/// When a bounded wait last gave up (ms after [`since_start`]'s origin; 0:
/// never). A connection last handed out before then may be the one that waited:
/// to a server that stopped answering but keeps its connections open (a stopped
/// process, whose kernel still acknowledges), it never closes, so the pool would
/// hand it out again and again, each time to wait out its bound.
static STALLED: AtomicU64 = AtomicU64::new(0);

/// Records that a wait on Postgres gave up now ([`bounded`] does; so does any
/// other bound on database work, such as the API's deadline).
pub fn note_stall() {
    STALLED.fetch_max(since_start(Instant::now()), Ordering::Relaxed);
}

fn since_start(at: Instant) -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    at.saturating_duration_since(origin).as_millis() as u64 + 1
}

/// The pool's check before it hands out an idle connection: none, unless a wait
/// gave up since the connection was last handed out; then one empty query within
/// `limit` (at most a second: a healthy server answers it in a millisecond, and
/// the pool checks idle connections one after another), and a connection that
/// does not answer is dropped for a new one (made on whichever host answers:
/// [`hosts`]).
async fn verify_after_stall(
    client: &mut deadpool_postgres::ClientWrapper,
    metrics: &deadpool_postgres::Metrics,
    limit: Duration,
) -> Result<(), deadpool_postgres::HookError> {
    let stalled = STALLED.load(Ordering::Relaxed);
    if stalled == 0 || since_start(metrics.recycled.unwrap_or(metrics.created)) > stalled {
        return Ok(());
    }
    match tokio::time::timeout(limit.min(Duration::from_secs(1)), crate::store::health::answers(client)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(deadpool_postgres::HookError::message(format!("a connection failed its check: {e}"))),
        Err(_) => Err(deadpool_postgres::HookError::message("a connection gave no answer after a stall; replaced")),
    }
}

/// The readiness probe: whether Postgres answers within `limit`; `Ok(Some(version))` when it does but
/// a switch migration this release needs is not applied yet (a process started
/// while Postgres was away could not refuse at start).
pub async fn ping(pool: &Pool, limit: std::time::Duration) -> Result<Option<&'static str>, StoreError> {
    bounded(limit, async {
        let client = conn(pool).await?;
        Ok(crate::migrate::pending_switches(&client).await?.first().copied())
    })
    .await
}
