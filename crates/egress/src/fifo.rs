//! The FIFO endpoints' runner: each `fifoEndpoint` gets its messages in strict
//! order (per value of its `key`, when it has one: different keys go side by side), in batches of up to `batchSize` gathered for up to `maxWaitSecs`, one
//! signed request at a time. The next batch waits until this one succeeded or
//! was given up (its retry schedule ran out). Runs in the worker role.
//!
//! A turn holds the endpoint's progress row under a lease (`store::fifo::pick`);
//! every write after it is fenced by the lease's token, so a runner that stalled
//! past its lease writes nothing. The batch's end is kept, and the lease
//! renewed, right before it is sent: a retry resends exactly the same messages
//! under the same `webhook-id`, and the request ends within the lease, so its
//! answer (or its timing out) is always recorded. An endpoint that is disabled,
//! or whose tenant is disabled or deleted, sends nothing: its turn parks it.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use hookgate_shared::config::LEASE_MARGIN;
use hookgate_shared::{
    db,
    store::{
        deliveries::ClaimedEndpoint,
        endpoints,
        fifo::{self, BatchAttempt, Ended, Held, Renewed},
        sinks::{Logged, Scanned},
    },
    AppState,
};
use rand::Rng;
use serde_json::{json, Value};

use crate::{
    deliver::{
        schedule,
        send::{self, Outcome, Request},
        senders::Senders,
    },
    destinations::config::{Config, Fifo},
    metrics::EgressMetrics,
    secrets, signing,
};

/// Turns run at once in one process: FIFO endpoints are served side by side,
/// each one request at a time.
const RUNNERS: usize = 4;

/// Runs the FIFO endpoints until the task is dropped.
pub async fn run(state: AppState, metrics: EgressMetrics) {
    let state = state.with_generic_plans();
    if let Some(why) = lease_too_short(&state.config) {
        tracing::warn!("{why}");
    }
    let senders = std::sync::Arc::new(Senders::new(&state.config, state.own_services.clone()));
    let mut loops = Vec::new();
    if !state.config.fifo_sweep.is_zero() {
        let state = state.clone();
        loops.push(tokio::spawn(async move { sweep_loop(state).await }));
    }
    for _ in 0..RUNNERS {
        let (state, metrics, senders) = (state.clone(), metrics.clone(), senders.clone());
        loops.push(tokio::spawn(async move { run_one(state, metrics, senders).await }));
    }
    for l in loops {
        let _ = l.await;
    }
}

async fn run_one(state: AppState, metrics: EgressMetrics, senders: std::sync::Arc<Senders>) {
    let idle = state.config.worker_poll.max(Duration::from_millis(50));
    let lease = state.config.delivery_lease;
    loop {
        let token: i64 = rand::rng().random_range(1..i64::MAX);
        let picked = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            fifo::pick(&**conn, token, lease.as_secs_f64()).await
        })
        .await;
        match picked {
            Ok(Some(h)) => turn(&state, &metrics, &senders, h).await,
            Ok(None) => tokio::time::sleep(idle).await,
            Err(e) => {
                tracing::warn!(error = %e, "no FIFO endpoint could be picked");
                tokio::time::sleep(idle).await;
            }
        }
    }
}

/// One turn of a held FIFO endpoint: wait for its batch to fill, or send it and
/// say what became of it. Every step is bounded (each database step by the
/// database's budget, the request within the lease renewed just before it), so
/// the turn ends, and writes its result, within its lease.
async fn turn(state: &AppState, metrics: &EgressMetrics, senders: &Senders, h: Held) {
    let tenant = h.tenant_id.clone();
    let ended = match attempt(state, metrics, senders, &h).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(tenant = %tenant, endpoint = %h.endpoint_id, error = %e, "a FIFO turn failed; tried again");
            (Ended::Wait(Utc::now() + Duration::from_secs(30)), None)
        }
    };
    let written = db::bounded(state.db_budget(), async {
        let mut conn = db::conn(&state.db).await?;
        let tx = conn.transaction().await?;
        let ok = fifo::end(&*tx, &tenant, &h, &ended.0, ended.1.as_ref()).await?;
        tx.commit().await?;
        Ok::<_, hookgate_shared::store::StoreError>(ok)
    })
    .await;
    match written {
        Ok(true) => {}
        Ok(false) => tracing::info!(endpoint = %h.endpoint_id, "a FIFO turn's lease passed on; its result is dropped"),
        // The lease runs out and the same batch is sent again: at least once.
        Err(e) => tracing::warn!(endpoint = %h.endpoint_id, error = %e, "a FIFO turn's result could not be written"),
    }
}

/// What the held endpoint's turn comes to, and the attempt it made if it sent.
async fn attempt(
    state: &AppState,
    metrics: &EgressMetrics,
    senders: &Senders,
    h: &Held,
) -> Result<(Ended, Option<BatchAttempt>), String> {
    let tenant = &h.tenant_id;
    let (ep, taking, scanned) = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        // Waits for a destination's save under way (its lock): an enable that
        // came first is seen here.
        let ep = endpoints::get_for_update(&**conn, tenant, &h.app_id, &h.endpoint_id).await?;
        let taking = ep.is_some() && fifo::taking(&**conn, tenant, h).await?;
        if !taking {
            return Ok((ep, false, Scanned::default()));
        }
        let size = ep.as_ref().and_then(|e| e.batch_size).map_or(1, i64::from).clamp(1, fifo::MOST_BATCH);
        let scanned = fifo::batch(&**conn, tenant, h, size).await?;
        Ok::<_, hookgate_shared::store::StoreError>((ep, true, scanned))
    })
    .await
    .map_err(|e| e.to_string())?;
    // Deleted: its progress rows went with it.
    let Some(ep) = ep else { return Ok((Ended::Wait(Utc::now() + Duration::from_secs(60)), None)) };
    // Shut (the endpoint disabled, its tenant disabled or deleted): parked, its
    // log not read. `renew` looks again right before a send.
    if !taking {
        return Ok((Ended::Parked, None));
    }
    let sealed = ep.destination.as_deref().ok_or("a FIFO endpoint without its configuration")?;
    let Config::FifoEndpoint(cfg) = Config::open(state, tenant, &h.app_id, &h.endpoint_id, sealed)? else {
        return Err("not a FIFO endpoint's configuration".into());
    };
    let size = ep.batch_size.map_or(1, i64::from).clamp(1, fifo::MOST_BATCH);
    // Fewer rows than a batch: the log was drained (as far as this turn could see,
    // below the horizon). Not known after a held batch (it was read only to its
    // end): the next turn looks.
    let drained = h.batch_end.is_none() && scanned.looked_at < size;
    let Some(looked_to) = scanned.looked_to else {
        // Nothing past the position below the horizon (or a held batch whose log
        // rows were pruned): rest, unless more was logged by the time the turn ends.
        return Ok((Ended::Past { end: h.batch_end.unwrap_or(h.pos), drained: h.batch_end.is_none() }, None));
    };
    // A held batch ends where it was cut; a new one at the last row looked at.
    let end = h.batch_end.unwrap_or(looked_to);
    let rows = &scanned.found;
    let Some(first) = rows.first() else {
        // Every message looked at is gone (a tenant's retention shorter than the
        // log's): past them, read in the same snapshot as the batch.
        return Ok((Ended::Past { end, drained }, None));
    };
    if h.batch_end.is_none() {
        // A batch still filling waits, up to maxWaitSecs from its oldest message.
        let ripe = first.logged_at + chrono::Duration::seconds(i64::from(ep.max_wait_secs.unwrap_or(0)));
        if scanned.looked_at < size && ripe > Utc::now() {
            return Ok((Ended::Wait(ripe), None));
        }
    }
    let claimed = ClaimedEndpoint {
        url: cfg.url.clone(),
        disabled: ep.disabled,
        throttle_rate: None,
        headers: Value::Null,
        secret: ep.secret.clone(),
        old_secret: ep.old_secret.clone(),
        old_secret_until: ep.old_secret_until,
        transformation_at: None,
        kind: ep.kind,
        destination: None,
        // A FIFO endpoint takes no OAuth or certificate (the API refuses them).
        auth_at: None,
    };
    let keys = secrets::signing_keys(state, tenant, &h.app_id, &h.endpoint_id, &claimed)?;
    let request = batch_request(&cfg, &keys, rows, &h.key);
    let recorded = secrets::recorded_headers(&request.headers);
    let bytes = request.body.len() as i64;
    let allow = hookgate_shared::networks::allowed(state, tenant).await.map_err(|e| e.to_string())?;
    // The batch's end is kept and the lease renewed right before the request,
    // which then has the lease less its margin, and at most the timeout: it ends,
    // and the turn writes what it answered, before any other runner may take
    // the endpoint. Nothing goes for an endpoint or tenant shut meanwhile.
    let lease = state.config.delivery_lease;
    let renewing = Instant::now();
    let renewed = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        fifo::renew(&**conn, tenant, h, end, lease.as_secs_f64()).await
    })
    .await
    .map_err(|e| e.to_string())?;
    match renewed {
        Renewed::Held => {}
        Renewed::Lost => return Err("the lease passed on".into()),
        Renewed::Shut => return Ok((Ended::Parked, None)),
    }
    let left = (renewing + lease).saturating_duration_since(Instant::now()).saturating_sub(LEASE_MARGIN);
    let sender = senders.for_networks(&allow);
    if left < sender.timeout() / 2 {
        // The renewal itself took most of the lease: send nothing now, rather
        // than a request cut short for Hookgate's delay. Soon again.
        return Ok((Ended::Wait(Utc::now() + Duration::from_secs(1)), None));
    }
    // Cut at `left` (a stall before the request), it is a timed-out attempt,
    // recorded and retried on the schedule like any other.
    let sent = sender.send_within(request, left).await;
    metrics.attempt(tenant.as_str(), sent.outcome.label());
    metrics.destination("fifoEndpoint", sent.outcome.label());
    let success = sent.outcome == Outcome::Success;
    let record = BatchAttempt {
        msg_ids: rows.iter().map(|r| r.msg_id.to_string()).collect(),
        url: cfg.url.clone(),
        success,
        status_code: sent.status as i16,
        response: sent.body.clone(),
        duration_ms: sent.duration.as_millis() as i64,
        request_headers: recorded,
        bytes,
    };
    let ended = match success {
        true => Ended::Past { end, drained },
        false => match schedule::next_delay(&state.config.retry_schedule, h.tries as usize + 1, sent.retry_after) {
            Some(delay) => Ended::Retry { at: Utc::now() + delay, end },
            // Given up: the next batch goes.
            None => Ended::Past { end, drained },
        },
    };
    Ok((ended, Some(record)))
}

/// The least a turn should have of its lease after its request to write the
/// result ([`fifo::end`]: a pooled connection, waited for up to the database
/// timeout, then a short transaction): max(2 s, `HOOKGATE_DB_TIMEOUT_MS`). The
/// request is bounded by the egress timeout and by the lease less
/// [`LEASE_MARGIN`] (1 s), so what the turn has after it is at least the lease
/// less the egress timeout. A result written after the lease ended is written
/// only if no other runner took the endpoint meanwhile (its write is fenced):
/// else that runner sends the batch again (at least once; never two requests at
/// once, as the first ended within the lease).
pub fn write_margin(db_timeout: Duration) -> Duration {
    db_timeout.max(Duration::from_secs(2))
}

/// Why a turn may be left too little of its lease to write its result
/// ([`write_margin`]), naming the settings; `None` when the lease leaves enough
/// past the egress timeout. Warned about at the start, not refused: such a
/// lease was valid before (it suits pushed deliveries), and a result written
/// late costs at worst a batch sent again.
pub fn lease_too_short(config: &hookgate_shared::Config) -> Option<String> {
    let margin = write_margin(config.db_timeout);
    (config.delivery_lease < config.egress_timeout + margin).then(|| {
        format!(
            "HOOKGATE_DELIVERY_LEASE_SECS ({}s) leaves a FIFO turn less than {margin:?} after a request of \
             HOOKGATE_EGRESS_TIMEOUT_SECS ({}s) to write its result (max(2 s, HOOKGATE_DB_TIMEOUT_MS)): a write that \
             waits that long for a pooled connection ends after the lease, and another runner may send the batch again",
            config.delivery_lease.as_secs(),
            config.egress_timeout.as_secs()
        )
    })
}

/// Progress rows one step of the sweep looks at.
const SWEEP_STEP: i64 = 1000;
/// How often the sweep's first round (the whole table, at start) steps.
const FIRST_ROUND: Duration = Duration::from_millis(200);

/// The safety net (`fifo::sweep`): every `HOOKGATE_FIFO_SWEEP_SECS`, the next
/// [`SWEEP_STEP`] progress rows in key order round the table, waking those left
/// at rest with work waiting while their endpoint and tenant are enabled. A first
/// round at start goes through the whole table a step every [`FIRST_ROUND`]
/// (after a random pause, so that workers started together do not sweep
/// together). Only a process of the previous release (which enables an endpoint
/// or a tenant without waking its parked rows) leaves such a row; a wake the
/// sweep makes is logged.
async fn sweep_loop(state: AppState) {
    let every = state.config.fifo_sweep;
    tokio::time::sleep(Duration::from_millis(rand::random_range(0..2_000))).await;
    let mut after: Option<fifo::RowKey> = None;
    let mut fast = true;
    // (Unread until the first round is over.)
    let mut last_step = Instant::now();
    let mut tick = tokio::time::interval(FIRST_ROUND.min(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !fast && last_step.elapsed() < every {
            continue;
        }
        last_step = Instant::now();
        let swept = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            fifo::sweep(&**conn, after.as_ref(), SWEEP_STEP).await
        })
        .await;
        match swept {
            Ok((woke, next)) => {
                if woke > 0 {
                    tracing::info!(woke, "the FIFO sweep woke rows left at rest with work waiting");
                }
                // The end of the table: a fast round is over; round again from the start.
                if next.is_none() {
                    fast = false;
                }
                after = next;
            }
            Err(e) => tracing::debug!(error = %e, "sweeping FIFO rows postponed"),
        }
    }
}

/// One batch as one signed request: `{"data": [message, …]}` in order, its
/// `webhook-id` the first message's id (a retry sends the same batch under it).
/// Documented in docs/destinations.md.
fn batch_request(cfg: &Fifo, keys: &[signing::EndpointSecret], rows: &[Logged], order_key: &str) -> Request {
    let data: Vec<Value> = rows.iter().map(message).collect();
    let body = serde_json::to_vec(&json!({ "data": data })).expect("JSON serialises");
    let id = rows.first().map(|r| r.msg_id.to_string()).unwrap_or_default();
    let timestamp = Utc::now().timestamp();
    let signature = signing::signature_header(keys, &id, timestamp, &body);
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in cfg.headers.iter().flatten() {
        send::header(&mut headers, k, v);
    }
    let ts = timestamp.to_string();
    let count = rows.len().to_string();
    for (name, value) in [
        ("content-type", "application/json"),
        ("webhook-id", id.as_str()),
        ("webhook-timestamp", ts.as_str()),
        ("webhook-signature", signature.as_str()),
        ("webhook-batch-size", count.as_str()),
    ] {
        send::header(&mut headers, name, value);
    }
    // A keyed endpoint's batch holds one key's messages: which key, for the receiver.
    if cfg.key.is_some() {
        send::header(&mut headers, "webhook-order-key", order_key);
    }
    Request { url: cfg.url.clone(), headers, body, put: false }
}

/// A message in a batch: its id, type, channels, time and payload (JSON as it
/// is; other bodies as text).
fn message(r: &Logged) -> Value {
    let payload = match &r.payload {
        None => Value::Null,
        Some(p) => serde_json::from_slice(p).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(p).into_owned())),
    };
    json!({
        "id": r.msg_id.to_string(),
        "eventType": r.event_type,
        "eventId": r.event_id,
        "channels": r.channels,
        "timestamp": timestamp(r.created_at),
        "payload": payload,
    })
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The margin a turn should have after its request to write its result is
    /// max(2 s, the database timeout): a lease shorter than the egress timeout and
    /// that is warned about, naming the settings; one as long is not, nor are the
    /// defaults.
    #[test]
    fn a_lease_that_leaves_a_fifo_turn_less_than_its_write_margin_is_warned_about_naming_the_settings() {
        let key = hookgate_shared::crypto::MasterKey::generate_base64();
        let config = |pairs: &[(&str, &str)]| {
            let mut env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            env.insert("DATABASE_URL".into(), "postgres://u@127.0.0.1/db".into());
            env.insert("HOOKGATE_MASTER_KEY".into(), key.clone());
            hookgate_shared::Config::from_sources(None, &env).expect("a lease longer than the timeout is valid")
        };
        // (database timeout in ms, lease, warned), the egress timeout 15 s
        for (db_ms, lease, warned) in [
            ("5000", "16", true),
            ("5000", "19", true),
            ("5000", "20", false),
            ("500", "16", true),
            ("500", "17", false),
            ("2500", "17", true),
            ("2500", "18", false),
        ] {
            let c = config(&[
                ("HOOKGATE_EGRESS_TIMEOUT_SECS", "15"),
                ("HOOKGATE_DB_TIMEOUT_MS", db_ms),
                ("HOOKGATE_DELIVERY_LEASE_SECS", lease),
            ]);
            match lease_too_short(&c) {
                Some(text) => {
                    assert!(warned, "lease {lease}, db timeout {db_ms} ms warned about: {text}");
                    for name in
                        ["HOOKGATE_DELIVERY_LEASE_SECS", "HOOKGATE_EGRESS_TIMEOUT_SECS", "HOOKGATE_DB_TIMEOUT_MS"]
                    {
                        assert!(text.contains(name), "{text}");
                    }
                }
                None => assert!(!warned, "lease {lease}, db timeout {db_ms} ms not warned about"),
            }
        }
        assert_eq!(lease_too_short(&config(&[])), None, "the defaults leave a turn enough");
    }
}
