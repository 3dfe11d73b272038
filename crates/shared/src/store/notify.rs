//! Waking delivery workers after a commit (`NOTIFY`) and listening for it
//! (`LISTEN`), without serialising commits; and telling them what the commit
//! made due (hints), so they claim it by key instead of looking for it.
//!
//! A `NOTIFY` inside a transaction takes a database-wide lock at commit and holds
//! it across the WAL flush, so every notifying commit waits for the one before it:
//! group commit in Postgres stops. Instead, committers poke or announce to this
//! handle after their commit: it wakes the worker in this process at once (with
//! the hints), and sends at most one round of `NOTIFY`s at a time, in a tiny
//! transaction of its own whose commit does not wait for the disk (a lost
//! notification costs latency, never a delivery), for workers elsewhere.
//!
//! Hints are only a short cut: every delivery made due has its endpoint's wake
//! written in the same statement (`store::wakes`), which is what workers list,
//! so a dropped hint (a full buffer, a lost notification) costs a listing.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, Once,
    },
    time::Duration,
};

use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio_postgres::AsyncMessage;

use super::queues::{Hint, Queue};
use crate::ids::{AppId, EndpointId, MessageId, TenantId};

/// The channel workers LISTEN on; [`Wake`] notifies it after commits.
pub const NOTIFY_CHANNEL: &str = "hookgate_deliveries";

/// Most hints waiting to be taken or sent; past it, new ones are dropped (the
/// wakes hold them anyway).
const MOST_HINTS: usize = 20_000;
/// Most bytes of one notification's payload (Postgres takes under 8,000).
const PAYLOAD: usize = 7_900;
/// What a payload carrying hints starts with; an empty payload is a plain wake-up.
const HINTS_V1: &str = "h1";

#[derive(Clone)]
pub struct Wake {
    inner: Arc<Inner>,
}

struct Inner {
    pool: deadpool_postgres::Pool,
    /// Bound of one NOTIFY: a stalled database must not hold the notifier.
    budget: Duration,
    /// This process, in the payloads it sends: its own worker has its hints already.
    sender: u64,
    local: Arc<Notify>,
    /// Hints for this process's worker (its own commits', and those heard of).
    hints: Arc<Mutex<Hints>>,
    /// Hints to send to workers elsewhere.
    outbox: Mutex<Hints>,
    kick: Notify,
    pending: AtomicBool,
    /// A wake-up without hints came (a resend, the previous release's commit):
    /// the worker lists the endpoints whose wake has come.
    plain: AtomicBool,
    started: Once,
}

/// The widest a hint may be, by the time in its ids: a commit's messages were
/// made within its statement. A wider one (a forged notification) is dropped, so
/// that no hint makes a worker scan an endpoint's history.
const WIDEST: u64 = 60_000;

/// Whether a hint is one a commit could have made.
pub fn plausible(h: &Hint) -> bool {
    match (h.lo.millis(), h.hi.millis()) {
        (Some(lo), Some(hi)) => lo <= hi && hi - lo <= WIDEST,
        _ => false,
    }
}

/// Hints by endpoint: a hint that starts at or after the last one of its endpoint
/// extends it; one below it (commits end out of id order) is kept apart, so a
/// merged range is never scanned again from below.
#[derive(Default)]
pub struct Hints {
    by_queue: HashMap<Queue, Vec<(MessageId, MessageId)>>,
    held: usize,
}

impl Hints {
    fn add(&mut self, h: Hint) -> bool {
        if !plausible(&h) {
            return false;
        }
        let ranges = self.by_queue.entry(h.queue).or_default();
        match ranges.last_mut() {
            Some(last) if h.lo >= last.0 => {
                if h.hi > last.1 {
                    last.1 = h.hi;
                }
                true
            }
            _ if self.held >= MOST_HINTS => false,
            _ => {
                ranges.push((h.lo, h.hi));
                self.held += 1;
                true
            }
        }
    }

    /// Takes every hint held.
    pub fn take(&mut self) -> Vec<Hint> {
        self.held = 0;
        self.by_queue
            .drain()
            .flat_map(|(queue, ranges)| ranges.into_iter().map(move |(lo, hi)| Hint { queue: queue.clone(), lo, hi }))
            .collect()
    }
}

impl Wake {
    pub fn new(pool: deadpool_postgres::Pool, budget: Duration) -> Self {
        Wake {
            inner: Arc::new(Inner {
                pool,
                budget,
                sender: rand::random(),
                local: Arc::new(Notify::new()),
                hints: Arc::new(Mutex::new(Hints::default())),
                outbox: Mutex::new(Hints::default()),
                kick: Notify::new(),
                pending: AtomicBool::new(false),
                plain: AtomicBool::new(false),
                started: Once::new(),
            }),
        }
    }

    /// What this process's worker waits on.
    pub fn local(&self) -> Arc<Notify> {
        self.inner.local.clone()
    }

    /// The hints this process's worker takes.
    pub fn hints(&self) -> Arc<Mutex<Hints>> {
        self.inner.hints.clone()
    }

    /// Call after committing deliveries. Cheap; coalesces bursts into one NOTIFY.
    pub fn poke(&self) {
        self.announce(Vec::new());
    }

    /// Whether a wake-up without hints came since the last call.
    pub fn take_plain(&self) -> bool {
        self.inner.plain.swap(false, Ordering::AcqRel)
    }

    /// Call after committing deliveries that these hints name: this process's
    /// worker and the workers elsewhere are told.
    pub fn announce(&self, hints: Vec<Hint>) {
        if hints.is_empty() {
            self.inner.plain.store(true, Ordering::Release);
        } else {
            let mut mine = self.inner.hints.lock().expect("hints lock");
            let mut out = self.inner.outbox.lock().expect("outbox lock");
            for h in hints {
                mine.add(h.clone());
                out.add(h);
            }
        }
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

/// How long the notifier lets commits gather before one round of `NOTIFY`s.
const NOTIFY_GATHER: Duration = Duration::from_millis(2);

async fn notifier(inner: Arc<Inner>) {
    loop {
        inner.kick.notified().await;
        tokio::time::sleep(NOTIFY_GATHER).await;
        inner.pending.store(false, Ordering::Release);
        let hints = inner.outbox.lock().expect("outbox lock").take();
        let payloads = encode(inner.sender, &hints);
        let sent = crate::db::bounded(inner.budget, async {
            let conn = crate::db::conn(&inner.pool).await?;
            // Its own transaction, whose commit need not wait for the WAL flush.
            conn.execute(
                "WITH quick AS (SELECT set_config('synchronous_commit', 'off', true))
                 SELECT pg_notify($1, p) FROM quick, unnest($2::text[]) AS p",
                &[&NOTIFY_CHANNEL, &payloads],
            )
            .await?;
            Ok(())
        })
        .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "NOTIFY failed; workers elsewhere will find the wakes");
        }
    }
}

/// The payloads announcing `hints`: lines of `tenant app endpoint lo hi` after a
/// header naming the sender; no hints, the header alone (a plain wake-up). (The
/// previous release's notifications are empty: they say that deliveries were
/// made due without their endpoints' wakes.)
fn encode(sender: u64, hints: &[Hint]) -> Vec<String> {
    let head = format!("{HINTS_V1} {sender:x}");
    if hints.is_empty() {
        return vec![head];
    }
    let mut out = Vec::new();
    let mut cur = head.clone();
    for h in hints {
        let line = format!("\n{} {} {} {} {}", h.queue.tenant_id, h.queue.app_id, h.queue.endpoint_id, h.lo, h.hi);
        if cur.len() + line.len() > PAYLOAD {
            out.push(std::mem::replace(&mut cur, head.clone()));
        }
        cur.push_str(&line);
    }
    out.push(cur);
    out
}

/// The hints of a payload (none: a plain wake-up), or `None` if it is this
/// process's own (its worker was told already) or not one of ours; a line that
/// does not parse is skipped (a hint is only a short cut).
fn decode(me: u64, payload: &str) -> Option<Vec<Hint>> {
    let mut lines = payload.lines();
    let mut parts = lines.next()?.split(' ');
    if parts.next() != Some(HINTS_V1) || parts.next().and_then(|s| u64::from_str_radix(s, 16).ok()) == Some(me) {
        return None;
    }
    let hints = lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let [t, a, e, lo, hi] = f[..] else { return None };
            Some(Hint {
                queue: Queue {
                    tenant_id: TenantId::parse(t).ok()?,
                    app_id: AppId::parse(a).ok()?,
                    endpoint_id: EndpointId::parse(e).ok()?,
                },
                lo: MessageId::parse(lo).ok()?,
                hi: MessageId::parse(hi).ok()?,
            })
        })
        .collect();
    Some(hints)
}

/// How often the LISTEN connection is asked whether it still answers.
const PING_EVERY: Duration = Duration::from_secs(10);

/// Wakes `wake` whenever a commit anywhere adds deliveries, with its hints in
/// `hints`; reconnects forever. The wakes remain, so a lost notification only
/// costs latency.
pub async fn listen(url: String, timeout: Duration, wake: Wake) {
    loop {
        if let Err(e) = listen_once(&url, timeout, &wake).await {
            tracing::debug!(error = %e, "delivery LISTEN connection lost; polling until it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn listen_once(url: &str, timeout: Duration, wake: &Wake) -> Result<(), crate::store::StoreError> {
    let (client, mut connection) = crate::db::connect(url, timeout).await?;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    // The connection must be polled for the LISTEN to complete and for
    // notifications to arrive; a task drives it and forwards notifications.
    // Ended on every way out: a connection to a stopped server never ends by itself.
    let _driver = AbortOnDrop(tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(n) = m {
                let _ = tx.send(n.payload().to_owned());
            }
        }
    }));
    let stalled = || crate::store::StoreError::TimedOut("the LISTEN connection gave no answer".into());
    tokio::time::timeout(timeout, client.batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}")))
        .await
        .map_err(|_| stalled())??;
    // Catch up on anything committed before LISTEN took effect.
    wake.inner.local.notify_one();
    // Asked now and then whether it still answers: to a server that stopped
    // answering but keeps the connection open (or one failed over behind a moved
    // address), it would otherwise wait for notifications that never come.
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        let payload = tokio::select! {
            got = rx.recv() => match got {
                Some(p) => p,
                None => break,
            },
            _ = ping.tick() => {
                tokio::time::timeout(timeout, client.simple_query("")).await.map_err(|_| stalled())??;
                continue;
            }
        };
        if payload.is_empty() {
            wake.inner.plain.store(true, Ordering::Release);
        }
        let Some(hints) = decode(wake.inner.sender, &payload) else { continue };
        if hints.is_empty() {
            wake.inner.plain.store(true, Ordering::Release);
        } else {
            let mut mine = wake.inner.hints.lock().expect("hints lock");
            for h in hints {
                mine.add(h);
            }
        }
        wake.inner.local.notify_one();
    }
    Ok(())
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint() -> Hint {
        let (lo, hi) = (MessageId::generate(), MessageId::generate());
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        Hint {
            queue: Queue {
                tenant_id: TenantId::generate(),
                app_id: AppId::generate(),
                endpoint_id: EndpointId::generate(),
            },
            lo,
            hi,
        }
    }

    #[test]
    fn hints_round_trip_through_payloads_that_fit_a_notification() {
        let hints: Vec<Hint> = (0..200).map(|_| hint()).collect();
        let payloads = encode(7, &hints);
        assert!(payloads.len() > 1, "200 hints need more than one payload");
        assert!(payloads.iter().all(|p| p.len() <= PAYLOAD), "every payload fits");
        let back: Vec<Hint> = payloads.iter().flat_map(|p| decode(8, p).unwrap()).collect();
        assert_eq!(back, hints);
    }

    #[test]
    fn a_process_ignores_its_own_hints_and_a_plain_wake_up_names_none() {
        let payloads = encode(7, &[hint()]);
        assert_eq!(decode(7, &payloads[0]), None, "its own");
        assert_eq!(encode(7, &[]), vec!["h1 7".to_owned()], "a plain wake-up: the header alone");
        assert_eq!(decode(8, "h1 7"), Some(vec![]), "another's plain wake-up");
        assert_eq!(decode(7, "h1 7"), None, "its own plain wake-up");
        assert_eq!(decode(8, ""), None, "not ours (the previous release's)");
        assert_eq!(decode(8, "h1 9\nnot a hint\ntnt_x app_y"), Some(vec![]), "malformed lines are skipped");
    }

    #[test]
    fn a_later_hint_extends_its_endpoints_range_and_an_earlier_one_stays_apart() {
        let mut hints = Hints::default();
        let mut ids: Vec<MessageId> = (0..4).map(|_| MessageId::generate()).collect();
        ids.sort();
        let mut h = hint();
        (h.lo, h.hi) = (ids[1].clone(), ids[1].clone());
        hints.add(h.clone());
        (h.lo, h.hi) = (ids[2].clone(), ids[3].clone());
        hints.add(h.clone());
        (h.lo, h.hi) = (ids[0].clone(), ids[0].clone());
        hints.add(h.clone());
        let mut taken: Vec<(MessageId, MessageId)> = hints.take().into_iter().map(|h| (h.lo, h.hi)).collect();
        taken.sort();
        assert_eq!(taken, vec![(ids[0].clone(), ids[0].clone()), (ids[1].clone(), ids[3].clone())]);
        assert!(hints.take().is_empty());
    }

    #[test]
    fn a_hint_wider_than_a_commit_could_make_is_dropped() {
        let mut h = hint();
        h.lo = MessageId::generated_at(chrono::Utc::now() - chrono::Duration::hours(1));
        h.hi = MessageId::generate();
        assert!(!plausible(&h));
        let mut hints = Hints::default();
        assert!(!hints.add(h));
        assert!(hints.take().is_empty());
    }
}
