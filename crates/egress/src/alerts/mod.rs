//! Alerts for people: sends what `store::alerts` queued (an e-mail through the
//! operator's SMTP server, a chat message through the SSRF guard of the tenant
//! whose URL it is), and raises `endpoint.failing` for endpoints failing long
//! enough and `source.stalled` for broker sources reading nothing but errors. One loop per worker process; the claim spreads rows across them.
//!
//! Never in a delivery's way: it has its own loop and connections, and a
//! raise is a few statements in the transaction that saw the condition. An
//! alert is sent at least once: a sender that dies after the server took it
//! and before deleting the row sends it again after the lease.

mod email;
pub mod text;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use hookgate_shared::{
    db,
    ids::TenantId,
    store::{
        alert_outbox::{self, Queued},
        alert_scans,
        alert_settings::{self, chat_purpose},
        alerts::{self, Condition, Target},
        StoreError,
    },
    AppState,
};

use crate::{
    deliver::{
        send::{Outcome, Request},
        senders::Senders,
    },
    metrics::EgressMetrics,
};
pub use email::{MailError, Mailer};

/// Alerts sent at once at most (and so claimed at once).
const BATCH: i64 = 20;
/// How long a claim holds an alert: more than an e-mail's or a chat call's bound.
const LEASE_SECS: f64 = 60.0;
/// Tries before an alert is given up (about eight and a half hours, doubling from a minute).
const MOST_TRIES: i16 = 10;
/// The longest a chat webhook may take to answer: well within the lease.
const CHAT_BOUND: Duration = Duration::from_secs(10);
/// Endpoints raised as failing per scan at most.
const SCAN_LIMIT: i64 = 200;

/// What became of one alert.
enum Sent {
    Told,
    /// Nowhere to send it any more (the setting was cleared, no SMTP server):
    /// dropped without retrying.
    Nowhere(&'static str),
    Failed {
        why: String,
        permanent: bool,
    },
}

/// Runs until the process stops.
pub async fn run(state: AppState, metrics: EgressMetrics) {
    let mailer = state.config.smtp.as_ref().and_then(|s| match Mailer::new(s) {
        Ok(m) => Some(Arc::new(m)),
        Err(e) => {
            tracing::error!(error = %e, "alert e-mails are off: the SMTP settings cannot be used");
            None
        }
    });
    let senders = Arc::new(Senders::new(&state.config, state.own_services.clone()));
    let poll = state.config.worker_poll.clamp(Duration::from_millis(100), Duration::from_secs(1));
    // The scan for failing endpoints reads every tenant's: at most every 15 s.
    let scan_every = (state.config.worker_poll * 10).clamp(Duration::from_secs(1), Duration::from_secs(15));
    let (mut scanned, mut pruned) = (None::<Instant>, None::<Instant>);
    let sending = Arc::new(tokio::sync::Semaphore::new(BATCH as usize));
    loop {
        if scanned.is_none_or(|t| t.elapsed() >= scan_every) {
            scanned = Some(Instant::now());
            if let Err(e) = db::bounded(state.db_budget() * 4, scan_failing(&state)).await {
                tracing::warn!(error = %e, "the scan for failing endpoints failed; it runs again");
            }
        }
        if pruned.is_none_or(|t| t.elapsed() >= Duration::from_secs(3600)) {
            pruned = Some(Instant::now());
            let p = db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                alert_outbox::prune_marks(&**conn).await
            });
            if let Err(e) = p.await {
                tracing::warn!(error = %e, "pruning alert marks failed; it runs again");
            }
        }
        // Sends run side by side, each settling its own row: a slow one holds a
        // place, not the next claim.
        let free = sending.available_permits() as i64;
        if free == 0 {
            tokio::time::sleep(poll).await;
            continue;
        }
        let claim: i64 = rand::random();
        let claimed = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            alert_outbox::claim(&**conn, claim, LEASE_SECS, free.min(BATCH)).await
        })
        .await;
        match claimed {
            Ok(rows) if !rows.is_empty() => {
                for q in rows {
                    let place = sending.clone().acquire_owned().await.expect("the semaphore is never closed");
                    let (state, mailer, senders, metrics) =
                        (state.clone(), mailer.clone(), senders.clone(), metrics.clone());
                    tokio::spawn(async move {
                        send_one(&state, mailer.as_deref(), &senders, &metrics, q, claim).await;
                        drop(place);
                    });
                }
            }
            Ok(_) => tokio::time::sleep(poll).await,
            Err(e) => {
                tracing::warn!(error = %e, "claiming alerts failed; it is tried again");
                tokio::time::sleep(poll).await;
            }
        }
    }
}

/// Raises `endpoint.failing` and `source.stalled` for what the scans find, each
/// in its own transaction (its mark is held only that long).
async fn scan_failing(state: &AppState) -> Result<(), StoreError> {
    let (failing, stalled) = {
        let conn = db::conn(&state.db).await?;
        (alert_scans::failing(&**conn, SCAN_LIMIT).await?, alert_scans::stalled(&**conn, SCAN_LIMIT).await?)
    };
    for (tenant, app, endpoint) in failing {
        let mut conn = db::conn(&state.db).await?;
        let tx = conn.transaction().await?;
        alerts::raise(&*tx, &tenant, &app, Condition::EndpointFailing, &endpoint).await?;
        tx.commit().await?;
    }
    for (tenant, source) in stalled {
        let mut conn = db::conn(&state.db).await?;
        let tx = conn.transaction().await?;
        alert_scans::raise_stalled(&*tx, &tenant, &source).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Sends one claimed alert and settles its row (fenced by `claim`).
async fn send_one(
    state: &AppState,
    mailer: Option<&Mailer>,
    senders: &Senders,
    metrics: &EgressMetrics,
    q: Queued,
    claim: i64,
) {
    let channel = if q.target.is_chat() { "chat" } else { "email" };
    let sent = match tell(state, mailer, senders, &q).await {
        Ok(s) => s,
        Err(e) => Sent::Failed { why: e.to_string(), permanent: false },
    };
    let (outcome, settle) = match &sent {
        Sent::Told => ("sent", Settle::Done),
        Sent::Nowhere(why) => {
            tracing::debug!(tenant = %q.tenant, target = q.target.as_str(), why, "an alert has nowhere to go");
            ("dropped", Settle::Done)
        }
        Sent::Failed { why, permanent } if *permanent || q.attempts >= MOST_TRIES => {
            tracing::warn!(tenant = %q.tenant, target = q.target.as_str(), condition = q.condition.as_str(),
                attempts = q.attempts, error = %why, "an alert could not be sent and is given up");
            ("failed", Settle::Done)
        }
        Sent::Failed { why, .. } => {
            tracing::info!(tenant = %q.tenant, target = q.target.as_str(), attempts = q.attempts, error = %why,
                "an alert could not be sent; it is tried again");
            let after = 60.0 * 2f64.powi(i32::from(q.attempts) - 1);
            ("retried", Settle::Retry(after.min(6.0 * 3600.0)))
        }
    };
    metrics.alert(channel, q.condition.as_str(), outcome);
    if outcome == "sent" && q.held > 0 {
        metrics.alerts_held.with_label_values(&[q.condition.as_str()]).inc_by(q.held as u64);
    }
    let settled = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        match settle {
            Settle::Done => alert_outbox::done(&**conn, &q.tenant, q.id, claim).await,
            Settle::Retry(after) => alert_outbox::retry(&**conn, &q.tenant, q.id, claim, after).await,
        }
    })
    .await;
    if let Err(e) = settled {
        // The lease passes and another sender takes it: it may be told twice.
        tracing::warn!(error = %e, "an alert's row could not be settled; it is taken again after its lease");
    }
}

enum Settle {
    Done,
    Retry(f64),
}

/// Reads where `q` goes now and sends it there.
async fn tell(state: &AppState, mailer: Option<&Mailer>, senders: &Senders, q: &Queued) -> Result<Sent, StoreError> {
    let owner = if q.target.is_operator() { alert_settings::operator() } else { q.tenant.clone() };
    let address = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        Ok(match q.target {
            Target::AppEmail => match &q.app {
                Some(app) => alert_outbox::app_email(&**conn, &q.tenant, app).await?,
                None => None,
            },
            Target::TenantEmail | Target::OperatorEmail => alert_settings::get(&**conn, &owner).await?.email,
            Target::TenantChat | Target::OperatorChat => alert_settings::get(&**conn, &owner)
                .await?
                .chat_url_sealed
                .map(|sealed| open_chat_url(state, &owner, &sealed))
                .transpose()?,
        })
    })
    .await?;
    let Some(address) = address else { return Ok(Sent::Nowhere("the setting was cleared")) };
    let told = text::render(q, q.target.is_operator());
    if !q.target.is_chat() {
        let Some(mailer) = mailer else { return Ok(Sent::Nowhere("no SMTP server is configured")) };
        return Ok(match mailer.send(&address, &told.subject, &told.body).await {
            Ok(()) => Sent::Told,
            Err(MailError::Permanent(why)) => Sent::Failed { why, permanent: true },
            Err(MailError::Transient(why)) => Sent::Failed { why, permanent: false },
        });
    }
    // The tenant's URL goes through the tenant's guard; the operator's, the operator's.
    let sender = if q.target.is_operator() {
        senders.base()
    } else {
        senders.for_networks(&hookgate_shared::networks::allowed(state, &q.tenant).await?)
    };
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::CONTENT_TYPE, reqwest::header::HeaderValue::from_static("application/json"));
    let request = Request { url: address, headers, body: text::chat(&told), put: false };
    let answer = sender.send_within(request, CHAT_BOUND).await;
    Ok(match answer.outcome {
        Outcome::Success => Sent::Told,
        // The guard refused the address: retrying the same URL cannot help.
        Outcome::Blocked | Outcome::Refused => {
            Sent::Failed { why: format!("the chat URL is refused ({})", answer.body), permanent: true }
        }
        Outcome::Http4xx if answer.status != 429 => {
            Sent::Failed { why: format!("the chat webhook answered {}", answer.status), permanent: true }
        }
        other => {
            Sent::Failed { why: format!("the chat webhook: {} {}", other.label(), answer.status), permanent: false }
        }
    })
}

/// The chat URL sealed for `owner`; a seal that does not open is corrupt data.
fn open_chat_url(state: &AppState, owner: &TenantId, sealed: &[u8]) -> Result<String, StoreError> {
    let plain = state
        .config
        .master_key
        .tenant_key(owner)
        .open(&chat_purpose(owner), sealed)
        .map_err(|e| StoreError::Corrupt(format!("an alert chat URL does not open: {e}")))?;
    String::from_utf8(plain).map_err(|_| StoreError::Corrupt("an alert chat URL is not UTF-8".into()))
}
