//! Publishing: the one place where "a message for an application" becomes a
//! message row and its deliveries, committed together (the outbox write).
//!
//! The common case (no channels, no tags) goes through group commit: concurrent
//! requests' messages and deliveries go into one statement, and each request is
//! answered after its commit. Messages with channels or tags take one statement
//! of their own; a message that names an application to create (`application` in
//! the body) creates it in the same transaction. Every path inserts deliveries by
//! the store's one fan-out rule, and wakes the workers after the commit.

use chrono::{DateTime, Utc};
use hookgate_shared::{
    batch::Batcher,
    db,
    ids::{AppId, InboundEventId, Ref, TenantId},
    store::{
        applications::{self, ApplicationFields},
        messages::{self, Message, NewMessage},
        publish_batch::{publish_batches, PublishRow, Published},
        queues::{Hint, Queue},
        StoreError,
    },
    trace, AppState,
};
use tracing::Instrument;

use crate::metrics::EgressMetrics;

/// Why a message was not published.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PublishError {
    #[error("a message with this eventId already exists")]
    Conflict,
    /// The request's `Idempotency-Key` already created a message (found by the caller).
    #[error("this Idempotency-Key already created a message")]
    SameRequest,
    #[error("application not found")]
    NoApplication,
    #[error("the database is unavailable")]
    Unavailable,
    /// Admission control held creation back (the workers are behind): nothing was written.
    #[error("delivery is behind: creation is held back; retry shortly")]
    Busy,
    /// A value Postgres cannot store (a NUL in a tag, say): the caller's to fix.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for PublishError {
    fn from(e: StoreError) -> Self {
        match e {
            _ if e.is_unavailable() => PublishError::Unavailable,
            StoreError::Conflict(c) if c == "message_request_keys_pkey" => PublishError::SameRequest,
            StoreError::Conflict(_) => PublishError::Conflict,
            StoreError::InvalidText => PublishError::Invalid(e.to_string()),
            other => PublishError::Internal(other.to_string()),
        }
    }
}

type Outcome = Result<Published, PublishError>;

/// The application a message creates when its path names none (Svix's
/// `application` in the body), within the tenant's `appsPerTenant`.
pub struct InlineApp {
    pub fields: ApplicationFields,
    pub cap: Option<u64>,
    /// Why it may not be created, found at the edge (its `uid` is not the
    /// path's): answered only when the path names no application, as Svix does.
    pub refusal: Option<String>,
}

#[derive(Clone)]
pub struct Publisher {
    state: AppState,
    metrics: EgressMetrics,
    batcher: Batcher<PublishRow, Outcome>,
}

/// Batches in flight at once, the largest batch, and how long a batch waits for
/// company while messages come closer together than that (`shared::batch`).
const WORKERS: usize = 4;
const MAX_BATCH: usize = 256;
const GATHER: std::time::Duration = std::time::Duration::from_millis(4);

async fn run(state: &AppState, rows: &[PublishRow]) -> Result<Vec<Published>, StoreError> {
    // A batch that lost a deadlock is run again: nothing of it was written.
    let mut tries = 0;
    loop {
        let done = db::bounded(state.db_budget(), async {
            let mut conn = db::conn(&state.db).await?;
            publish_batches(&mut conn, rows).await
        })
        .await
        .inspect_err(|e| db::forget_stale_plans(&state.db, e));
        match done {
            Err(e) if e.is_lost_race() && tries < 3 => tries += 1,
            other => return other,
        }
    }
}

/// One batch of the group commit; one outcome per row, in order.
async fn commit_batch(state: &AppState, rows: Vec<PublishRow>) -> Vec<Outcome> {
    let results = match run(state, &rows).await {
        Ok(r) => r.into_iter().map(Ok).collect(),
        // One bad row must not fail its neighbours: publish them one by one.
        Err(e) if !e.is_unavailable() && rows.len() > 1 => {
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                out.push(match run(state, std::slice::from_ref(row)).await {
                    Ok(mut r) => Ok(r.remove(0)),
                    Err(e) => Err(e.into()),
                });
            }
            out
        }
        Err(e) => vec![Err(e.into()); rows.len()],
    };
    // The workers are told what this commit made due, endpoint by endpoint.
    let hints: Vec<Hint> = rows
        .iter()
        .zip(&results)
        .filter_map(|(row, r)| match r {
            Ok(Published::Created { app_id, endpoints, .. }) => Some((row, app_id, endpoints)),
            _ => None,
        })
        .flat_map(|(row, app_id, endpoints)| {
            endpoints.iter().map(move |e| Hint {
                queue: Queue { tenant_id: row.tenant_id.clone(), app_id: app_id.clone(), endpoint_id: e.clone() },
                lo: row.msg_id.clone(),
                hi: row.msg_id.clone(),
            })
        })
        .collect();
    if !hints.is_empty() {
        state.wake.announce(hints);
    }
    results
}

impl Publisher {
    pub fn start(state: AppState, metrics: EgressMetrics) -> Self {
        let batch_state = state.clone();
        let batcher = Batcher::start(WORKERS, MAX_BATCH, GATHER, move |rows: Vec<PublishRow>| {
            let state = batch_state.clone();
            async move { commit_batch(&state, rows).await }
        });
        state.admission.start();
        Publisher { state, metrics, batcher }
    }

    /// Publishes `new` to the application `app`, creating it first from `inline`
    /// when it does not exist. Answers after the commit that holds the message and
    /// its deliveries.
    pub async fn publish(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        mut new: NewMessage,
        inline: Option<InlineApp>,
    ) -> Result<Message, PublishError> {
        let span = hookgate_shared::otel_span!("message.create", tenant = %tenant, msg = %new.id);
        async move {
            // The message keeps this span's context: its deliveries continue the trace.
            new.traceparent = trace::current_traceparent();
            self.publish_in_span(tenant, app, new, inline).await
        }
        .instrument(span)
        .await
    }

    async fn publish_in_span(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        new: NewMessage,
        inline: Option<InlineApp>,
    ) -> Result<Message, PublishError> {
        // A request retried under its Idempotency-Key after its outcome was lost
        // (a crash, a timeout after the commit) finds its message: it cannot run twice.
        if let Some(key) = new.request_key.clone() {
            if let Some(done) = self.by_request_key(tenant, app, &key).await? {
                return Ok(done);
            }
        }
        if let Some(event_id) = new.event_id.as_deref().filter(|e| InboundEventId::parse(e).is_ok()) {
            if self.event_id_in_use(tenant, app, event_id).await? {
                return Err(PublishError::Conflict);
            }
        }
        // While workers fall behind, creation waits its turn (refused as busy if
        // that is more than a moment away).
        self.state.admission.wait(tenant).await.map_err(|_| PublishError::Busy)?;
        if let Some(key) = new.request_key.clone() {
            return match self.single_or_inline(tenant, app, new, inline).await {
                Err(PublishError::SameRequest) => {
                    self.by_request_key(tenant, app, &key).await?.ok_or(PublishError::SameRequest)
                }
                other => other,
            };
        }
        // The group commit writes JSON messages without channels or tags; others go alone.
        if new.channels.is_none() && new.tags.is_none() && new.content_type == "application/json" {
            match self.batched(tenant, app, &new).await? {
                Some(created_at) => {
                    self.metrics.message_created(tenant.as_str());
                    return Ok(Message { created_at, ..message_of(new) });
                }
                None if inline.is_none() => return Err(PublishError::NoApplication),
                None => {}
            }
        }
        self.single_or_inline(tenant, app, new, inline).await
    }

    /// Whether an ingress message of the application already has this eventId.
    async fn event_id_in_use(&self, tenant: &TenantId, app: &Ref<AppId>, event_id: &str) -> Result<bool, PublishError> {
        let found = db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            messages::event_id_in_use(&**conn, tenant, app, event_id).await
        });
        Ok(found.await?)
    }

    async fn by_request_key(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        key: &str,
    ) -> Result<Option<Message>, PublishError> {
        let found = db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            messages::by_request_key(&**conn, tenant, app, key, self.state.config.idempotency_ttl).await
        });
        Ok(found.await?)
    }

    /// One statement, or one transaction with the inline application.
    async fn single_or_inline(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        new: NewMessage,
        inline: Option<InlineApp>,
    ) -> Result<Message, PublishError> {
        let (message, fanned) = match self.single(tenant, app, &new).await? {
            Some(done) => done,
            None => {
                let inline = inline.ok_or(PublishError::NoApplication)?;
                if let Some(why) = inline.refusal {
                    return Err(PublishError::Invalid(why));
                }
                match self.with_new_app(tenant, inline, &new).await {
                    // Another request made the application first (its uid is
                    // taken): publish to it, as if it had been there all along.
                    Err(PublishError::Conflict) => {
                        self.single(tenant, app, &new).await?.ok_or(PublishError::Conflict)?
                    }
                    made => made?,
                }
            }
        };
        if fanned > 0 {
            self.state.wake.poke();
        }
        self.metrics.message_created(tenant.as_str());
        Ok(message)
    }

    /// Through group commit; `None` when the tenant has no such application.
    async fn batched(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        new: &NewMessage,
    ) -> Result<Option<DateTime<Utc>>, PublishError> {
        let row = PublishRow {
            tenant_id: tenant.clone(),
            app: app.clone(),
            msg_id: new.id.clone(),
            event_id: new.event_id.clone(),
            event_type: new.event_type.clone(),
            payload: new.payload.clone(),
            traceparent: new.traceparent.clone(),
            payload_expires_at: new.payload_expires_at,
        };
        let outcome = self.batcher.submit(row).await.unwrap_or(Err(PublishError::Unavailable))?;
        match outcome {
            Published::Created { created_at, .. } => Ok(Some(created_at)),
            Published::Conflict => Err(PublishError::Conflict),
            Published::NoApplication => Ok(None),
        }
    }

    /// One statement of its own; `None` when the tenant has no such application.
    async fn single(
        &self,
        tenant: &TenantId,
        app: &Ref<AppId>,
        new: &NewMessage,
    ) -> Result<Option<(Message, u64)>, PublishError> {
        let published = db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            messages::publish(&**conn, tenant, app, new).await
        });
        Ok(published.await?)
    }

    /// Creates the application, then the message, in one transaction.
    async fn with_new_app(
        &self,
        tenant: &TenantId,
        inline: InlineApp,
        new: &NewMessage,
    ) -> Result<(Message, u64), PublishError> {
        let done = db::bounded(self.state.db_budget(), async {
            let mut conn = db::conn(&self.state.db).await?;
            let tx = conn.transaction().await?;
            let made =
                applications::insert_capped(&*tx, tenant, &AppId::generate(), &inline.fields, inline.cap).await?;
            let Ok(app) = made else { return Ok(Err(made.err().unwrap_or_default())) };
            let done = messages::publish(&*tx, tenant, &Ref::Id(app.id.clone()), new).await?;
            tx.commit().await?;
            Ok(Ok(done))
        })
        .await?;
        let done = done
            .map_err(|n| PublishError::Invalid(hookgate_shared::quota::apps_full(n, inline.cap.unwrap_or_default())))?;
        done.ok_or_else(|| PublishError::Internal("the new application is not visible in its own transaction".into()))
    }
}

/// The message a batched publish created, as the API shows it.
fn message_of(new: NewMessage) -> Message {
    Message {
        id: new.id,
        event_id: new.event_id,
        event_type: new.event_type,
        channels: None,
        tags: None,
        payload: Some(new.payload),
        content_type: new.content_type,
        created_at: Utc::now(),
    }
}
