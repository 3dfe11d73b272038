//! Group commit for async admission: requests hand their candidate to a few
//! committer tasks, which put everything that is waiting into one transaction and
//! answer each request after the commit that holds its rows. Under load a batch
//! forms while the previous one commits; alone, a request commits by itself.

use std::collections::HashMap;

use hookgate_egress::metrics::EgressMetrics;
use hookgate_shared::{
    batch::Batcher,
    db,
    ids::{InboundEventId, MessageId, SourceId, TenantId},
    status::InboundStatus,
    store::{
        inbound_batch::{self, BatchRow},
        queues::{Hint, Queue},
        StoreError,
    },
    trace, AppState,
};

use tracing::Instrument;

use crate::admit::{self, Admitted, Candidate, Layer};

/// Largest batch one transaction takes.
const MAX_BATCH: usize = 256;
/// Committer tasks per process: batches in flight at once.
const COMMITTERS: usize = 4;
/// How long a batch waits for company while admissions come closer together
/// than that (`shared::batch`).
const GATHER: std::time::Duration = std::time::Duration::from_millis(4);

/// Why a batched admission failed; `unavailable` maps to 503.
#[derive(Debug, Clone)]
pub struct CommitError {
    pub unavailable: bool,
    pub detail: String,
}

impl CommitError {
    fn unavailable(detail: impl Into<String>) -> Self {
        CommitError { unavailable: true, detail: detail.into() }
    }
}

impl From<StoreError> for CommitError {
    fn from(e: StoreError) -> Self {
        CommitError { unavailable: e.is_unavailable(), detail: e.to_string() }
    }
}

/// One admission and the source's retention (for the Redis fast path).
type Job = (BatchRow, i32);

#[derive(Clone)]
pub struct GroupCommit {
    state: AppState,
    batcher: Batcher<Job, Result<Admitted, CommitError>>,
}

impl GroupCommit {
    /// Starts the committers on the current runtime. Admitted events' messages
    /// count in `hookgate_messages_created_total`, as the API's do.
    pub fn start(state: AppState, metrics: EgressMetrics) -> Self {
        let batch_state = state.clone();
        let batcher = Batcher::start(COMMITTERS, MAX_BATCH, GATHER, move |jobs: Vec<Job>| {
            let (state, metrics) = (batch_state.clone(), metrics.clone());
            async move { run_batch(&state, &metrics, jobs).await }
        });
        state.admission.start();
        GroupCommit { state, batcher }
    }

    pub async fn admit(&self, c: Candidate<'_>) -> Result<Admitted, CommitError> {
        // While workers fall behind, admission waits its turn (refused as busy,
        // 503, if that is more than a moment away: the provider retries).
        if self.state.admission.wait(&c.source.tenant_id).await.is_err() {
            return Err(CommitError::unavailable("delivery is behind; retry shortly"));
        }
        let row = BatchRow {
            tenant_id: c.source.tenant_id.clone(),
            source_id: c.source.id.clone(),
            key: c.key,
            plain_key: c.plain_key,
            id: InboundEventId::generate(),
            app_id: c.source.app_id.clone(),
            msg_id: MessageId::generate(),
            event_type: c.event_type,
            content_type: c.content_type,
            payload: c.payload,
            // The admitting span's context: the message's deliveries continue its trace.
            traceparent: trace::current_traceparent(),
        };
        self.batcher
            .submit((row, c.retention_days))
            .await
            .unwrap_or_else(|| Err(CommitError::unavailable("committers stopped")))
    }
}

/// One statement, so one implicit transaction: atomic, and one commit.
/// Tells the workers at once what it made due, endpoint by endpoint.
async fn commit(state: &AppState, rows: &[BatchRow]) -> Result<Vec<bool>, StoreError> {
    // A batch that lost a deadlock is run again: nothing of it was written.
    let mut tries = 0;
    let admitted = loop {
        let done = db::bounded(state.db_budget(), async {
            let mut conn = db::conn(&state.db).await?;
            inbound_batch::admit_batches(&mut conn, rows).await
        })
        .await
        .inspect_err(|e| db::forget_stale_plans(&state.db, e));
        match done {
            Err(e) if e.is_lost_race() && tries < 3 => tries += 1,
            other => break other?,
        }
    };
    let hints: Vec<Hint> = rows
        .iter()
        .zip(&admitted)
        .filter_map(|(row, eps)| eps.as_ref().map(|eps| (row, eps)))
        .flat_map(|(row, eps)| {
            eps.iter().map(move |e| Hint {
                queue: Queue { tenant_id: row.tenant_id.clone(), app_id: row.app_id.clone(), endpoint_id: e.clone() },
                lo: row.msg_id.clone(),
                hi: row.msg_id.clone(),
            })
        })
        .collect();
    if !hints.is_empty() {
        state.wake.announce(hints);
    }
    Ok(admitted.iter().map(Option::is_some).collect())
}

/// Admits a batch in its own span, linked to each request it answers.
async fn run_batch(state: &AppState, metrics: &EgressMetrics, jobs: Vec<Job>) -> Vec<Result<Admitted, CommitError>> {
    let span = hookgate_shared::otel_span!("ingress.commit", rows = jobs.len());
    for (row, _) in &jobs {
        trace::add_link(&span, row.traceparent.as_deref());
    }
    commit_jobs(state, metrics, jobs).instrument(span).await
}

/// Admits a batch; one answer per job, in order.
async fn commit_jobs(state: &AppState, metrics: &EgressMetrics, jobs: Vec<Job>) -> Vec<Result<Admitted, CommitError>> {
    // The first job of each key goes into the batch; later copies in the same batch
    // are duplicates of it.
    let mut first_of: HashMap<(TenantId, SourceId, String), usize> = HashMap::new();
    let mut rows = Vec::new();
    let mut slot = Vec::with_capacity(jobs.len());
    for (row, _) in &jobs {
        let k = (row.tenant_id.clone(), row.source_id.clone(), row.key.clone());
        match first_of.get(&k) {
            Some(&i) => slot.push((i, false)),
            None => {
                first_of.insert(k, rows.len());
                slot.push((rows.len(), true));
                rows.push(row.clone());
            }
        }
    }
    let admitted = match commit(state, &rows).await {
        Ok(a) => a,
        Err(e) if !e.is_unavailable() && jobs.len() > 1 => {
            // One bad row must not fail its neighbours: admit them one by one.
            tracing::warn!(error = %e, n = jobs.len(), "batched admission failed; admitting one by one");
            let mut answers = Vec::with_capacity(jobs.len());
            for (row, _) in &jobs {
                answers.push(match commit(state, std::slice::from_ref(row)).await {
                    Ok(a) if a[0] => {
                        metrics.message_created(row.tenant_id.as_str());
                        Ok(Admitted::Accepted(row.id.clone()))
                    }
                    Ok(_) => duplicate_of(state, row).await,
                    Err(e) => Err(e.into()),
                });
            }
            return answers;
        }
        Err(e) => return vec![Err(CommitError::from(e)); jobs.len()],
    };
    // Losers: keys that existed before, and repeats within the batch.
    let losers: Vec<&BatchRow> =
        jobs.iter().zip(&slot).filter(|(_, (i, first))| !(*first && admitted[*i])).map(|((row, _), _)| row).collect();
    let existing = db::bounded(state.db_budget(), async {
        let mut conn = db::conn(&state.db).await?;
        inbound_batch::duplicates_batches(&mut conn, &losers).await
    })
    .await;
    // The event is committed either way, but a duplicate's answer names it: when
    // the lookup fails, a copy whose original this batch did not write answers
    // 503 (the provider retries and is told the id) rather than a 2xx naming nothing.
    let lookup_failed = existing.is_err();
    let mut existing = match existing {
        Ok(ids) => ids.into_iter(),
        Err(_) => vec![None; losers.len()].into_iter(),
    };
    let mut winners = Vec::new();
    let mut answers = Vec::with_capacity(jobs.len());
    let mut gone = Gone::new();
    // Keys a sync-mode request left `processing` (the source switched to async):
    // in flight while its lease runs, then taken over and admitted here.
    let mut abandoned = Vec::new();
    for ((row, retention_days), (i, first)) in jobs.into_iter().zip(slot) {
        let answer = if first && admitted[i] {
            metrics.message_created(row.tenant_id.as_str());
            winners.push(admit::Committed {
                tenant: row.tenant_id.clone(),
                key: row.key.clone(),
                id: row.id.clone(),
                retention_days,
            });
            Ok(Admitted::Accepted(row.id))
        } else {
            match existing.next().flatten() {
                Some(e) if e.status == InboundStatus::Processing => {
                    if e.lease_expired && first {
                        abandoned.push((answers.len(), row, retention_days));
                    }
                    Ok(Admitted::InFlight)
                }
                Some(e) => Ok(Admitted::Duplicate(Some(e.id), Layer::Postgres)),
                // A repeat of a key this batch admitted: its original is this batch's row.
                None if admitted[i] => Ok(Admitted::Duplicate(Some(rows[i].id.clone()), Layer::Postgres)),
                // The original could not be read (the lookup failed, or it was pruned
                // since the insert lost, or its source was deleted meanwhile): never a
                // 2xx without the event it repeats.
                None => unexplained(state, &row, lookup_failed, &mut gone).await,
            }
        };
        answers.push(answer);
    }
    let taken_over = !abandoned.is_empty();
    for (at, row, retention_days) in abandoned {
        let taken = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            inbound_batch::take_over_async(&**conn, &row).await
        })
        .await;
        match taken {
            Ok(Some(id)) => {
                metrics.message_created(row.tenant_id.as_str());
                winners.push(admit::Committed {
                    tenant: row.tenant_id.clone(),
                    key: row.key.clone(),
                    id: id.clone(),
                    retention_days,
                });
                answers[at] = Ok(Admitted::Accepted(id));
            }
            // Taken by another request meanwhile, or no longer abandoned: in flight.
            Ok(None) => {}
            Err(e) => answers[at] = Err(e.into()),
        }
    }
    // The batch's own admissions were announced after their commit; these not.
    if taken_over {
        state.wake.poke();
    }
    admit::remember_many(&state.redis, &winners).await;
    answers
}

async fn duplicate_of(state: &AppState, row: &BatchRow) -> Result<Admitted, CommitError> {
    let ids = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        inbound_batch::duplicates_batch(&conn, &row.tenant_id, &[row]).await
    })
    .await?;
    match ids.into_iter().next().flatten() {
        Some(e) if e.status == InboundStatus::Processing => Ok(Admitted::InFlight),
        Some(e) => Ok(Admitted::Duplicate(Some(e.id), Layer::Postgres)),
        None => unexplained(state, row, false, &mut HashMap::new()).await,
    }
}

/// Whether each source a batch looked up is gone (looked up once per batch).
type Gone = HashMap<(TenantId, SourceId), bool>;

/// A row neither admitted nor answered by an original: its source was deleted
/// while the request was in flight (its parents' lock found no source: the 404
/// the request's retry would get), or the original is unreadable (503).
async fn unexplained(
    state: &AppState,
    row: &BatchRow,
    lookup_failed: bool,
    gone: &mut Gone,
) -> Result<Admitted, CommitError> {
    if lookup_failed {
        return Err(unreadable_original(true));
    }
    let k = (row.tenant_id.clone(), row.source_id.clone());
    if !gone.contains_key(&k) {
        gone.insert(k.clone(), admit::source_gone(state, &row.tenant_id, &row.source_id).await);
    }
    match gone[&k] {
        true => Ok(Admitted::SourceGone),
        false => Err(unreadable_original(false)),
    }
}

/// The answer to a copy whose original could not be read: 503, so the provider
/// retries and is then told the event's id (or, if it was pruned meanwhile, admitted).
fn unreadable_original(lookup_failed: bool) -> CommitError {
    let why = if lookup_failed { "could not be read" } else { "is gone" };
    CommitError::unavailable(format!("the event this copy repeats {why}; retry"))
}
