//! Destinations other than an HTTP endpoint: a RabbitMQ queue, a Postgres table,
//! an SQS queue, an SNS topic, an EventBridge bus, an S3 bucket.
//! A destination is an endpoint row of another `kind`, so the fan-out, the claim,
//! retries, the attempt log and the failing/disabled states are the endpoints';
//! this module only hands one claimed message over, bounded by the attempt's
//! time, and says how it went in the words an attempt records.
//!
//! Each kind keeps one connection per destination (`Links`), dialled only to
//! addresses the SSRF guard allows, made again after any error.
//!
//! Whether an answer came from a private network (and so is kept only if the
//! operator says) is told from the addresses actually dialled (`Reached`), never
//! from a name resolved again afterwards, which could answer otherwise.
//!
//! Each kind owns its configuration and behaviour in its own file
//! (`kind::Kind`); `config` names the kinds once and dispatches to them.

mod aws;
pub mod brokers;
pub mod config;
mod event_bridge;
mod fifo;
mod from_rabbitmq;
mod from_redis;
mod from_sqs;
mod kind;
mod polling;
mod postgres;
mod rabbitmq;
mod reach;
mod s3;
mod sns;
mod sqs;

pub use reach::refuse_own;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use hookgate_shared::ids::{AppId, EndpointId, TenantId};

use crate::{
    deliver::send::{response_text, Outcome, Sender, Sent, KEEP_RESPONSE, PRIVATE_NOT_KEPT},
    ssrf::{classify, Guard},
};
use config::Config;

/// Which destination a kept connection belongs to.
pub(crate) type Key = (TenantId, AppId, EndpointId);

/// One message as a destination receives it.
pub struct Outbound<'a> {
    pub app_id: &'a str,
    pub msg_id: &'a str,
    pub event_type: &'a str,
    pub event_id: Option<&'a str>,
    pub channels: Option<&'a [String]>,
    pub payload: &'a [u8],
    pub content_type: &'a str,
    pub created_at: DateTime<Utc>,
    /// Seconds since the epoch, as signed.
    pub timestamp: i64,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`, `event-type`: a
    /// consumer verifies what it reads as a webhook receiver would.
    pub headers: &'a [(String, String)],
}

/// Why a hand-over failed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub outcome: Outcome,
    pub text: String,
}

impl Failure {
    /// The other side answered and did not take it (a broker's return, a database error).
    fn refused(text: impl Into<String>) -> Self {
        Failure { outcome: Outcome::Refused, text: text.into() }
    }

    /// No answer: the connection could not be made or broke.
    fn connect(text: impl Into<String>) -> Self {
        Failure { outcome: Outcome::ConnectError, text: text.into() }
    }

    /// A kind read in order from its log (FIFO, polling), handed a single delivery.
    fn reads_its_log() -> Self {
        Failure::refused("this destination reads its log in order; it takes no single deliveries")
    }
}

/// Connections kept per destination, of one kind: each destination's in a slot
/// of its own (a lock held only while connecting, or for Postgres while a
/// statement runs); past `MOST` destinations one other slot makes room.
pub(crate) struct Kept<L, const MOST: usize> {
    open: std::sync::Mutex<std::collections::HashMap<Key, std::sync::Arc<tokio::sync::Mutex<Option<L>>>>>,
}

impl<L, const MOST: usize> Default for Kept<L, MOST> {
    fn default() -> Self {
        Kept { open: Default::default() }
    }
}

impl<L, const MOST: usize> Kept<L, MOST> {
    /// Unhooks the destination's slot (after a timeout: its connection may be half
    /// open), so the next hand-over connects afresh. The connection itself goes
    /// when the last hand-over in flight on it (each holds the slot) ends.
    pub(crate) fn forget(&self, key: &Key) {
        self.open.lock().expect("the links lock is never poisoned").remove(key);
    }

    /// The destination's slot, made empty if new.
    pub(crate) fn slot(&self, key: &Key) -> std::sync::Arc<tokio::sync::Mutex<Option<L>>> {
        let mut open = self.open.lock().expect("the links lock is never poisoned");
        if open.len() >= MOST && !open.contains_key(key) {
            // One goes (whichever the map yields first), not all: a new
            // destination does not cost every other its connection. A slot in
            // use lives on with its holder and is dropped after.
            if let Some(gone) = open.keys().next().cloned() {
                open.remove(&gone);
            }
        }
        open.entry(key.clone()).or_default().clone()
    }
}

/// How a destination's host name becomes addresses: the system's resolver (a
/// test gives its own, to make a name answer as it chooses).
pub use hookgate_shared::own_services::Lookup;

fn system_lookup() -> Lookup {
    Arc::new(|host, port| Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), port)).await?.collect()) }))
}

/// Whether one hand-over reached an address of a private network: noted where
/// each kind dials (or its HTTP client's connection says where it went).
#[derive(Clone, Default)]
pub(crate) struct Reached(Arc<AtomicBool>);

impl Reached {
    pub(crate) fn dialled(&self, addr: SocketAddr) {
        self.private_if(classify(addr.ip()).is_some());
    }

    pub(crate) fn private_if(&self, private: bool) {
        if private {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    fn private(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The process's kept connections, for every destination kind.
pub struct Publishers {
    rabbitmq: rabbitmq::Links,
    postgres: postgres::Links,
    lookup: Lookup,
}

impl Default for Publishers {
    fn default() -> Self {
        Publishers::with_lookup(system_lookup())
    }
}

impl Publishers {
    /// Publishers whose RabbitMQ and Postgres hosts are resolved by `lookup`.
    pub fn with_lookup(lookup: Lookup) -> Self {
        Publishers { rabbitmq: Default::default(), postgres: Default::default(), lookup }
    }

    /// Hands `out` to the destination, within `bound`: an attempt's result, with
    /// status 0 (no HTTP status) and the other side's answer as its response.
    /// `guard` and `sender` allow what the tenant may reach (the AWS SDK sends
    /// through `sender`; RabbitMQ and Postgres dial what `guard` allows).
    /// `hide_private`: a failed hand-over's answer from an address of a private
    /// network (one an allow-list opened) is replaced by [`PRIVATE_NOT_KEPT`].
    #[allow(clippy::too_many_arguments)]
    pub async fn publish(
        &self,
        key: &Key,
        sealed: &[u8],
        cfg: &Config,
        guard: &Guard,
        sender: &Sender,
        out: &Outbound<'_>,
        bound: Duration,
        hide_private: bool,
    ) -> Sent {
        let started = Instant::now();
        let reached = Reached::default();
        let at = HandOver {
            key,
            fingerprint: sealed,
            dial: Dial { guard, lookup: &self.lookup, reached: &reached },
            sender,
            bound,
            reached: &reached,
            links: self,
        };
        let work = cfg.publish(&at, out);
        let (outcome, body) = match tokio::time::timeout(bound, work).await {
            Ok(Ok(answer)) => (Outcome::Success, answer),
            Ok(Err(f)) => (f.outcome, f.text),
            Err(_) => {
                // A connection that gave no answer in time is not used again by
                // later hand-overs. Those in flight on it hold its slot, and so the
                // connection, until they end: this one's lane alone is given up
                // (RabbitMQ's, left dirty, is not used again).
                self.rabbitmq.forget(key);
                self.postgres.forget(key);
                (Outcome::Timeout, format!("no answer within {} ms", bound.as_millis()))
            }
        };
        // As for an endpoint's response: the answer of a private network that an
        // allow-list opened is not kept unless the operator says so (the tenant and
        // its portal links read the attempt log). Only a failure carries the other
        // side's words; "private" is where this hand-over's connection went.
        let body = match outcome != Outcome::Success && hide_private && reached.private() {
            true => PRIVATE_NOT_KEPT.to_owned(),
            false => body,
        };
        // As a response body is kept: text Postgres takes (no NUL), at most 4 KiB.
        let kept = &body.as_bytes()[..body.len().min(KEEP_RESPONSE)];
        Sent { outcome, status: 0, body: response_text(kept), duration: started.elapsed(), retry_after: None }
    }
}

/// What one hand-over has to work with, whatever its kind: the destination's
/// key and the fingerprint of its stored configuration (a kept connection is
/// used only while it is the same), how to dial, the guarded HTTP client, the
/// attempt's bound, where to note a private network reached, and the kept
/// connections.
pub(crate) struct HandOver<'a> {
    key: &'a Key,
    fingerprint: &'a [u8],
    dial: Dial<'a>,
    sender: &'a Sender,
    bound: Duration,
    reached: &'a Reached,
    links: &'a Publishers,
}

/// What a RabbitMQ or Postgres connect needs to dial: the guard, the resolver,
/// and where to note the address dialled.
pub(crate) struct Dial<'a> {
    guard: &'a Guard,
    lookup: &'a Lookup,
    reached: &'a Reached,
}

impl Dial<'_> {
    /// Resolves a host a tenant named and keeps the addresses it may reach: the
    /// SSRF guard's, and never Hookgate's own database or Redis at their ports.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Failure> {
        let found: Vec<SocketAddr> = (self.lookup)(host.to_owned(), port)
            .await
            .map_err(|e| Failure::connect(format!("`{host}` could not be resolved: {e}")))?;
        self.guard.refresh_own().await;
        let allowed =
            self.guard.filter(found).map_err(|b| Failure { outcome: Outcome::Blocked, text: b.to_string() })?;
        match allowed.is_empty() {
            true => Err(Failure::connect(format!("`{host}` has no address"))),
            false => Ok(allowed),
        }
    }
}

#[cfg(test)]
mod kept_tests {
    use super::*;

    fn key(n: usize) -> Key {
        (TenantId::generate(), AppId::from_db(format!("app_{n}")), EndpointId::from_db(format!("ep_{n}")))
    }

    #[test]
    fn a_full_map_makes_room_for_one_by_dropping_one_not_all() {
        let kept: Kept<u32, 4> = Kept::default();
        let keys: Vec<Key> = (0..5).map(key).collect();
        for k in &keys[..4] {
            *kept.slot(k).try_lock().unwrap() = Some(1);
        }
        kept.slot(&keys[4]);
        let open = kept.open.lock().unwrap();
        assert_eq!(open.len(), 4, "still at most four");
        let still = keys[..4].iter().filter(|k| open.get(*k).is_some_and(|s| s.try_lock().unwrap().is_some())).count();
        assert_eq!(still, 3, "three of the four kept their connection");
    }
}
