//! The Postgres connection pool, and the bounds on every wait for Postgres: a down
//! or stalled database answers fast instead of hanging requests.

use std::{future::Future, time::Duration};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use deadpool_postgres::{Client, Transaction};

use crate::store::StoreError;

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
/// LISTEN), with the same TLS as the pool's.
pub async fn connect(url: &str) -> Result<(tokio_postgres::Client, Connection), StoreError> {
    let (pg, tls) = target(url)?;
    pg.connect(tls).await.map_err(StoreError::from)
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
    let (mut pg, tls) = target(url)?;
    pg.connect_timeout(timeout);
    if pg.get_application_name().is_none() {
        pg.application_name("hookgate");
    }
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
    pg.keepalives(true).keepalives_idle(Duration::from_secs(15)).keepalives_interval(Duration::from_secs(5));
    pg.keepalives_retries(3).tcp_user_timeout(timeout.max(Duration::from_secs(10)));
    let manager = Manager::from_config(pg, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|e| StoreError::Pool(e.to_string()))
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
        Err(_) => Err(StoreError::TimedOut(format!("no answer from Postgres within {limit:?}"))),
    }
}
