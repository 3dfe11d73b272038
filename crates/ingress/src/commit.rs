//! Group commit for async admission: requests hand their candidate to a few
//! committer tasks, which put everything that is waiting into one transaction and
//! answer each request after the commit that holds its rows. Under load a batch
//! forms while the previous one commits; alone, a request commits by itself.

use std::{collections::HashMap, sync::Arc};

use hookgate_egress::metrics::EgressMetrics;
use hookgate_shared::{
    db,
    ids::{InboundEventId, MessageId},
    store::{
        inbound_batch::{self, BatchRow},
        StoreError,
    },
    AppState,
};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::admit::{self, Admitted, Candidate, Layer};

/// Largest batch one transaction takes.
const MAX_BATCH: usize = 256;
/// Committer tasks per process: batches in flight at once. Enough that Postgres's
/// own group commit of WAL flushes has company.
const COMMITTERS: usize = 16;

/// Why a batched admission failed; `unavailable` maps to 503.
#[derive(Debug, Clone)]
pub struct CommitError {
    pub unavailable: bool,
    pub detail: String,
}

impl From<StoreError> for CommitError {
    fn from(e: StoreError) -> Self {
        CommitError { unavailable: e.is_unavailable(), detail: e.to_string() }
    }
}

struct Job {
    row: BatchRow,
    retention_days: i32,
    reply: oneshot::Sender<Result<Admitted, CommitError>>,
}

#[derive(Clone)]
pub struct GroupCommit {
    jobs: mpsc::UnboundedSender<Job>,
}

impl GroupCommit {
    /// Starts the committers on the current runtime. Admitted events' messages
    /// count in `hookgate_messages_created_total`, as the API's do.
    pub fn start(state: AppState, metrics: EgressMetrics) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..COMMITTERS {
            tokio::spawn(committer(state.clone(), metrics.clone(), rx.clone()));
        }
        GroupCommit { jobs: tx }
    }

    pub async fn admit(&self, c: Candidate<'_>) -> Result<Admitted, CommitError> {
        let row = BatchRow {
            tenant_id: c.source.tenant_id.to_string(),
            source_id: c.source.id.to_string(),
            key: c.key,
            id: InboundEventId::generate().to_string(),
            app_id: c.source.app_id.to_string(),
            msg_id: MessageId::generate().to_string(),
            event_type: c.event_type,
            content_type: c.content_type,
            payload: c.payload,
        };
        let (reply, answer) = oneshot::channel();
        let job = Job { row, retention_days: c.source.retention_days, reply };
        self.jobs.send(job).map_err(|_| CommitError { unavailable: true, detail: "committers stopped".into() })?;
        answer.await.map_err(|_| CommitError { unavailable: true, detail: "committer ended".into() })?
    }
}

async fn committer(state: AppState, metrics: EgressMetrics, rx: Arc<Mutex<mpsc::UnboundedReceiver<Job>>>) {
    loop {
        let jobs = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            let mut jobs = vec![first];
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            jobs
        };
        run_batch(&state, &metrics, jobs).await;
    }
}

/// One statement, so one implicit transaction: atomic, and one commit.
async fn commit(state: &AppState, rows: &[BatchRow]) -> Result<Vec<bool>, StoreError> {
    let conn = db::conn(&state.db).await?;
    inbound_batch::admit_batch(&**conn, rows).await
}

async fn run_batch(state: &AppState, metrics: &EgressMetrics, jobs: Vec<Job>) {
    // The first job of each key goes into the batch; later copies in the same batch
    // are duplicates of it.
    let mut first_of: HashMap<(String, String, String), usize> = HashMap::new();
    let mut rows = Vec::new();
    let mut slot = Vec::with_capacity(jobs.len());
    for j in &jobs {
        let k = (j.row.tenant_id.clone(), j.row.source_id.clone(), j.row.key.clone());
        match first_of.get(&k) {
            Some(&i) => slot.push((i, false)),
            None => {
                first_of.insert(k, rows.len());
                slot.push((rows.len(), true));
                rows.push(j.row.clone());
            }
        }
    }
    let admitted = match commit(state, &rows).await {
        Ok(a) => a,
        Err(e) if !e.is_unavailable() && jobs.len() > 1 => {
            // One bad row must not fail its neighbours: admit them one by one.
            tracing::warn!(error = %e, n = jobs.len(), "batched admission failed; admitting one by one");
            for j in jobs {
                let one = commit(state, std::slice::from_ref(&j.row)).await;
                let answer = match one {
                    Ok(a) if a[0] => {
                        state.wake.poke();
                        metrics.message_created(&j.row.tenant_id);
                        Ok(Admitted::Accepted(InboundEventId::from_db(j.row.id.clone())))
                    }
                    Ok(_) => duplicate_of(state, &j.row).await,
                    Err(e) => Err(e.into()),
                };
                let _ = j.reply.send(answer);
            }
            return;
        }
        Err(e) => {
            let err = CommitError::from(e);
            for j in jobs {
                let _ = j.reply.send(Err(err.clone()));
            }
            return;
        }
    };
    // Losers: keys that existed before, and repeats within the batch.
    let losers: Vec<&BatchRow> =
        jobs.iter().zip(&slot).filter(|(_, (i, first))| !(*first && admitted[*i])).map(|(j, _)| &j.row).collect();
    let existing = match db::conn(&state.db).await {
        Ok(conn) => inbound_batch::duplicates_batch(&**conn, &losers).await.map_err(CommitError::from),
        Err(e) => Err(CommitError::from(e)),
    };
    let mut existing = match existing {
        // The event is committed either way: a failed count only loses the count.
        Ok(ids) => ids.into_iter(),
        Err(_) => vec![None; losers.len()].into_iter(),
    };
    let mut winners = Vec::new();
    for (j, (i, first)) in jobs.into_iter().zip(slot) {
        let answer = if first && admitted[i] {
            metrics.message_created(&j.row.tenant_id);
            winners.push((j.row.key.clone(), j.row.id.clone(), j.retention_days));
            Admitted::Accepted(InboundEventId::from_db(j.row.id))
        } else {
            let id = existing.next().flatten().or_else(|| (!first).then(|| rows[i].id.clone()));
            Admitted::Duplicate(id.map(InboundEventId::from_db), Layer::Postgres)
        };
        let _ = j.reply.send(Ok(answer));
    }
    if !winners.is_empty() {
        state.wake.poke();
    }
    admit::remember_many(&state.redis, &winners).await;
}

async fn duplicate_of(state: &AppState, row: &BatchRow) -> Result<Admitted, CommitError> {
    let conn = db::conn(&state.db).await?;
    let ids = inbound_batch::duplicates_batch(&**conn, &[row]).await?;
    Ok(Admitted::Duplicate(ids.into_iter().next().flatten().map(InboundEventId::from_db), Layer::Postgres))
}
