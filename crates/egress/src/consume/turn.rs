//! One broker source's consumer: reads a batch from the broker, publishes each
//! message (within the tenant's message rate and daily cap, as the API does),
//! and acknowledges each only once its message is committed, or once it is set
//! aside as a dead letter. What cannot be published now (a quota spent, the
//! database away, creation held back) is given back to the broker for later.
//! A copy the broker delivers again finds the message the first made (its key,
//! `map`), so a crash between the commit and the acknowledgement makes no
//! second message.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::NaiveDate;
use hookgate_shared::{
    db, limits,
    quota::Limit,
    store::{
        broker_sources::{self, BrokerSource},
        usage,
    },
    AppState,
};
use tokio::sync::watch;

use super::map::map;
use crate::{
    deliver::senders::Senders,
    destinations::brokers::{BrokerConfig, Consumer, Reach, Received},
    metrics::EgressMetrics,
    publish::{PublishError, Publisher},
    ssrf::Guard,
};

/// Messages read at once at most.
const BATCH: usize = 100;
/// How long a read waits for the first message.
const WAIT: Duration = Duration::from_secs(1);
/// How long a connection may take.
const CONNECT_BOUND: Duration = Duration::from_secs(15);
/// How often a consumer that reads fine says so (`last_read_at`).
const SAY_READ_EVERY: Duration = Duration::from_secs(10);

/// What became of one broker message.
enum Handled {
    Published,
    Duplicate,
    DeadLettered,
    /// Not now: given back to the broker, read again later.
    Later(String),
}

impl Handled {
    fn label(&self) -> &'static str {
        match self {
            Handled::Published => "published",
            Handled::Duplicate => "duplicate",
            Handled::DeadLettered => "dead_lettered",
            Handled::Later(_) => "held",
        }
    }
}

/// Consumes `source` until `stop` says so (its lease passed on, it changed).
pub async fn consume(
    state: AppState,
    publisher: Arc<Publisher>,
    metrics: EgressMetrics,
    senders: Arc<Senders>,
    source: BrokerSource,
    tag: String,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_secs(1);
    while !*stop.borrow() {
        let connected = connect(&state, &senders, &source, &tag).await;
        let mut consumer = match connected {
            Ok(c) => c,
            Err(e) => {
                said(&state, &source, Some(&e)).await;
                metrics.broker_errors.with_label_values(&[&source.kind]).inc();
                tracing::info!(tenant = %source.tenant_id, source = %source.id, error = %e, "a broker source cannot connect; it tries again");
                let _ = tokio::time::timeout(backoff, stop.changed()).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        match read(&state, &publisher, &metrics, &source, &mut consumer, &mut stop, &mut backoff).await {
            Ok(()) => return,
            Err(e) => {
                // Reconnects after a pause that grows while nothing is read.
                said(&state, &source, Some(&e)).await;
                metrics.broker_errors.with_label_values(&[&source.kind]).inc();
                let _ = tokio::time::timeout(backoff, stop.changed()).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// Publishes at once at most this many of a batch: one source does not take
/// the process's connections.
const AT_ONCE: usize = 8;
/// How often messages held (a quota spent) are tried again.
const HOLD_FOR: Duration = Duration::from_secs(1);

/// Reads and settles until `stop` (`Ok`) or a broker error (`Err`, to reconnect).
/// Messages that cannot be published now are held, unsettled, and tried again
/// before anything more is read: the source pauses, and the broker neither
/// counts them as delivered again nor gives them to another consumer.
async fn read(
    state: &AppState,
    publisher: &Publisher,
    metrics: &EgressMetrics,
    source: &BrokerSource,
    consumer: &mut Consumer,
    stop: &mut watch::Receiver<bool>,
    backoff: &mut Duration,
) -> Result<(), String> {
    let mut said_at: Option<Instant> = None;
    // Each held message with the day of the daily-cap place it kept, if it
    // kept one (an attempt whose outcome is unknown keeps its place for the next).
    let mut held: Vec<(Received, Option<NaiveDate>)> = Vec::new();
    loop {
        let batch = if held.is_empty() {
            let read = tokio::select! {
                _ = stop.changed() => return Ok(()),
                r = consumer.receive(BATCH, WAIT) => r,
            };
            let batch = read?;
            // Something was read without an error: the next failure starts its pauses afresh.
            *backoff = Duration::from_secs(1);
            if said_at.is_none_or(|t| t.elapsed() >= SAY_READ_EVERY) {
                said(state, source, None).await;
                said_at = Some(Instant::now());
            }
            batch.into_iter().map(|r| (r, None)).collect()
        } else {
            if tokio::time::timeout(HOLD_FOR, stop.changed()).await.is_ok() {
                // Stopping: what is held goes back to the broker (or its lease does).
                for (r, _) in &held {
                    let _ = consumer.release(&r.token).await;
                }
                return Ok(());
            }
            let mut kept = Vec::with_capacity(held.len());
            for (r, day) in std::mem::take(&mut held) {
                // One the broker no longer holds for this consumer comes back
                // from the broker: it is dropped here, not published twice over.
                match consumer.keep(&r.token).await {
                    Ok(()) => kept.push((r, day)),
                    Err(e) => {
                        tracing::info!(source = %source.id, error = %e, "a held broker message went back to its broker")
                    }
                }
            }
            kept
        };
        if batch.is_empty() {
            continue;
        }
        let gate = tokio::sync::Semaphore::new(AT_ONCE);
        let handled = futures_util::future::join_all(batch.iter().map(|(r, day)| async {
            let _turn = gate.acquire().await.expect("the semaphore is never closed");
            handle(state, publisher, source, r, *day).await
        }))
        .await;
        for ((r, _), (h, day)) in batch.into_iter().zip(handled) {
            metrics.broker_messages.with_label_values(&[&source.kind, h.label()]).inc();
            match h {
                Handled::Later(why) => {
                    tracing::debug!(source = %source.id, why, "a broker message waits");
                    held.push((r, day));
                }
                // If the acknowledgement is lost the broker delivers it again; its key finds what it made.
                _ => consumer.ack(&r.token).await?,
            }
        }
    }
}

async fn connect(state: &AppState, senders: &Senders, source: &BrokerSource, tag: &str) -> Result<Consumer, String> {
    let cfg = BrokerConfig::open(state, &source.tenant_id, &source.id, &source.kind, &source.config_sealed)
        .map_err(|e| format!("the configuration cannot be read: {e}"))?;
    let allow = hookgate_shared::networks::allowed(state, &source.tenant_id).await.map_err(|e| e.to_string())?;
    let guard = Guard::new(allow.to_vec()).protecting(state.own_services.clone());
    guard.refresh_own().await;
    let sender = senders.for_networks(&allow);
    cfg.consume(tag, &Reach { guard: &guard, sender: &sender }, CONNECT_BOUND).await
}

/// Records how the last read went (bounded; a failure to record is only logged).
async fn said(state: &AppState, source: &BrokerSource, error: Option<&str>) {
    let error = error.map(|e| e.chars().take(500).collect::<String>());
    let done = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        broker_sources::read_went(&**conn, &source.tenant_id, &source.id, error.as_deref()).await
    })
    .await;
    if let Err(e) = done {
        tracing::debug!(error = %e, "a broker source's state was not recorded");
    }
}

/// Publishes one broker message, or sets it aside; with the daily-cap place it
/// still keeps (`kept`: one an earlier try kept, which it uses rather than take another).
async fn handle(
    state: &AppState,
    publisher: &Publisher,
    source: &BrokerSource,
    r: &Received,
    kept: Option<NaiveDate>,
) -> (Handled, Option<NaiveDate>) {
    let tenant = &source.tenant_id;
    let mapped = match map(r, &source.id, source.app_id.as_ref(), state.config.max_body) {
        Ok(m) => m,
        Err(reason) => return (dead_letter(state, source, r, &reason).await, kept),
    };
    let quotas = match limits::quotas(state, tenant).await {
        Ok(q) => q,
        Err(e) => return (Handled::Later(e.to_string()), kept),
    };
    if kept.is_none() && limits::rate(state, tenant, &quotas, Limit::MessagesPerSecond).await.is_err() {
        return (Handled::Later("the tenant's messagesPerSecond is spent".into()), None);
    }
    let day = match quotas.limit(Limit::MessagesPerDay) {
        _ if kept.is_some() => kept,
        None => None,
        Some(cap) => {
            let reserved = db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                usage::reserve_messages(&**conn, tenant, cap as i64, 1).await
            })
            .await;
            match reserved {
                Ok(Some(day)) => Some(day),
                Ok(None) => return (Handled::Later("the tenant's messagesPerDay is reached".into()), None),
                Err(e) => return (Handled::Later(e.to_string()), None),
            }
        }
    };
    let made = mapped.new.id.clone();
    let app = mapped.app.clone();
    let published = publisher.publish(tenant, &mapped.app, mapped.new, None).await;
    let not_created = match &published {
        Ok(m) => m.id != made,
        Err(PublishError::Conflict | PublishError::SameRequest | PublishError::NoApplication)
        | Err(PublishError::Invalid(_) | PublishError::Busy) => true,
        Err(_) => false,
    };
    // A copy found by its key, with a place kept from the try that (it turns out)
    // made it: that place is the message's, and stays taken.
    let made_before =
        matches!(&published, Ok(m) if m.id != made) || matches!(&published, Err(PublishError::SameRequest));
    if let (true, Some(day)) = (not_created && !(made_before && kept.is_some()), day) {
        let _ = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            usage::release_messages(&**conn, tenant, day, 1).await
        })
        .await;
    }
    // A place is kept only past an attempt whose outcome is unknown.
    let still = if not_created { None } else { day };
    let handled = match published {
        Ok(m) if m.id == made => Handled::Published,
        Ok(_) | Err(PublishError::Conflict | PublishError::SameRequest) => Handled::Duplicate,
        Err(PublishError::NoApplication) => {
            dead_letter(state, source, r, &format!("the application `{app}` does not exist")).await
        }
        Err(PublishError::Invalid(why)) => dead_letter(state, source, r, &why).await,
        Err(e) => return (Handled::Later(e.to_string()), still),
    };
    (handled, None)
}

/// Sets `r` aside with `reason`; once it is stored the broker may forget it.
async fn dead_letter(state: &AppState, source: &BrokerSource, r: &Received, reason: &str) -> Handled {
    let headers = serde_json::Value::Object(
        r.headers.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect(),
    );
    let stored = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        broker_sources::dead_letter(
            &**conn,
            &source.tenant_id,
            &source.id,
            r.broker_id.as_deref(),
            reason,
            &r.body,
            &headers,
        )
        .await
    })
    .await;
    match stored {
        Ok(()) => Handled::DeadLettered,
        Err(e) => Handled::Later(format!("the dead letter could not be stored: {e}")),
    }
}
