//! The FIFO endpoints' runner: each `fifoEndpoint` gets its messages in strict
//! order (per value of its `key`, when it has one: different keys go side by side), in batches of up to `batchSize` gathered for up to `maxWaitSecs`, one
//! signed request at a time. The next batch waits until this one succeeded or
//! was given up (its retry schedule ran out). Runs in the worker role.
//!
//! A turn holds the endpoint's progress row under a lease (`store::fifo::pick`);
//! every write after it is fenced by the lease's token, so a runner that stalled
//! past its lease writes nothing. The batch's end is kept before it is sent:
//! a retry resends exactly the same messages under the same `webhook-id`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    store::{
        deliveries::ClaimedEndpoint,
        endpoints,
        fifo::{self, BatchAttempt, Ended, Held},
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
/// say what became of it.
async fn turn(state: &AppState, metrics: &EgressMetrics, senders: &Senders, h: Held) {
    let tenant = h.tenant_id.clone();
    // The turn ends well inside its lease, or is dropped (its request with it)
    // and writes nothing: no other runner sends this endpoint's batch meanwhile.
    let within = state.config.delivery_lease.saturating_sub(Duration::from_secs(5));
    let ended = match tokio::time::timeout(within, attempt(state, metrics, senders, &h)).await {
        Ok(Ok(e)) => e,
        Ok(Err(e)) => {
            tracing::warn!(tenant = %tenant, endpoint = %h.endpoint_id, error = %e, "a FIFO turn failed; tried again");
            (Ended::Wait(Utc::now() + Duration::from_secs(30)), None)
        }
        Err(_) => {
            tracing::warn!(endpoint = %h.endpoint_id, "a FIFO turn ran out of its lease; its batch goes again");
            return;
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
    let (ep, rows) = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        let ep = endpoints::get_for_update(&**conn, tenant, &h.app_id, &h.endpoint_id).await?;
        let size = ep.as_ref().and_then(|e| e.batch_size).map_or(1, i64::from).clamp(1, fifo::MOST_BATCH);
        let rows = fifo::batch(&**conn, tenant, h, size).await?;
        Ok::<_, hookgate_shared::store::StoreError>((ep, rows))
    })
    .await
    .map_err(|e| e.to_string())?;
    let Some(ep) = ep else { return Ok((Ended::Wait(Utc::now() + Duration::from_secs(60)), None)) };
    let sealed = ep.destination.as_deref().ok_or("a FIFO endpoint without its configuration")?;
    let Config::FifoEndpoint(cfg) = Config::open(state, tenant, &h.app_id, &h.endpoint_id, sealed)? else {
        return Err("not a FIFO endpoint's configuration".into());
    };
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        // Every message past the position is gone (a tenant's retention shorter
        // than the log's): move past them, or past the batch that held them.
        let end = match h.batch_end {
            Some(end) => Some(end),
            None => db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                fifo::log_end(&**conn, tenant, h).await
            })
            .await
            .map_err(|e| e.to_string())?,
        };
        return Ok((Ended::Past { end: end.unwrap_or(h.pos), drained: end.is_none() }, None));
    };
    if h.batch_end.is_none() {
        // A batch still filling waits, up to maxWaitSecs from its oldest message.
        let size = ep.batch_size.map_or(1, i64::from).clamp(1, fifo::MOST_BATCH) as usize;
        let ripe = first.logged_at + chrono::Duration::seconds(i64::from(ep.max_wait_secs.unwrap_or(0)));
        if rows.len() < size && ripe > Utc::now() {
            return Ok((Ended::Wait(ripe), None));
        }
        let kept = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            fifo::hold_batch(&**conn, tenant, h, last.at).await
        })
        .await
        .map_err(|e| e.to_string())?;
        if !kept {
            return Err("the lease passed on".into());
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
    let request = batch_request(&cfg, &keys, &rows, &h.key);
    let recorded = secrets::recorded_headers(&request.headers);
    let bytes = request.body.len() as i64;
    let allow = hookgate_shared::networks::allowed(state, tenant).await.map_err(|e| e.to_string())?;
    let sent = senders.for_networks(&allow).send(request).await;
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
    // Fewer than a batch: the log was drained (as far as this turn could see).
    // Not known after a held batch (it was read only to its end): the next
    // turn looks.
    let drained =
        h.batch_end.is_none() && (rows.len() as i64) < ep.batch_size.map_or(1, i64::from).clamp(1, fifo::MOST_BATCH);
    let ended = match success {
        true => Ended::Past { end: last.at, drained },
        false => match schedule::next_delay(&state.config.retry_schedule, h.tries as usize + 1, sent.retry_after) {
            Some(delay) => Ended::Retry { at: Utc::now() + delay, end: last.at },
            // Given up: the next batch goes.
            None => Ended::Past { end: last.at, drained },
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
