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
        sinks::Logged,
    },
    AppState,
};
use rand::Rng;
use serde_json::{json, Value};

use crate::{
    deliver::{
        schedule,
        send::{self, Outcome, Request, Senders},
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
    let senders = std::sync::Arc::new(Senders::new(&state.config, state.own_services.clone()));
    let mut loops = Vec::new();
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
    let (ep, scanned) = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        let ep = endpoints::get_for_update(&**conn, tenant, &h.app_id, &h.endpoint_id).await?;
        let size = ep.as_ref().and_then(|e| e.batch_size).map_or(1, i64::from).clamp(1, fifo::MOST_BATCH);
        let scanned = fifo::batch(&**conn, tenant, h, size).await?;
        Ok::<_, hookgate_shared::store::StoreError>((ep, scanned))
    })
    .await
    .map_err(|e| e.to_string())?;
    // Deleted: its progress rows went with it.
    let Some(ep) = ep else { return Ok((Ended::Wait(Utc::now() + Duration::from_secs(60)), None)) };
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

/// One batch as one signed request: `{"data": [message, …]}` in order, its
/// `webhook-id` the first message's id (a retry sends the same batch under it).
/// Documented in docs/destinations.md.
fn batch_request(cfg: &Fifo, keys: &[Vec<u8>], rows: &[Logged], order_key: &str) -> Request {
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
