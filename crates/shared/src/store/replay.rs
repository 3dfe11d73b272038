//! One step of a running background task: a bounded batch of an endpoint's replay
//! or recovery,
//! done in one transaction with the task's row held and its cursor moved past it.
//!
//! A step is whole or nothing: the deliveries it makes due and the cursor that
//! says so commit together, so a process dying mid-task neither loses nor
//! repeats a batch, and a second worker skips the row the first one holds.

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use tokio_postgres::GenericClient;

use super::{
    tasks::{ReplayFilter, TaskKind, TaskStatus},
    wakes, StoreError,
};
use crate::ids::{self, AppId, EndpointId, MessageId, TaskId, TenantId};

/// What one step did.
#[derive(Debug)]
pub struct Stepped {
    pub tenant: TenantId,
    pub task: TaskId,
    pub kind: TaskKind,
    /// Deliveries made due by this step.
    pub sent: u64,
    pub status: TaskStatus,
    /// Why the step's work failed (undone; the task tries again after the others).
    pub failed: Option<StoreError>,
}

/// The window is on messages' `created_at`; message ids (which partitions and the
/// scan's order go by) are made a moment before it, on the creating process's
/// clock rather than Postgres's. The scan reaches this far
/// past either end of the window, and `created_at` decides.
const ID_MARGIN: Duration = Duration::hours(1);

/// Steps the running task stepped least lately, skipping one another worker is
/// stepping; looks at up to `batch` messages. `None` when no task is waiting.
/// Tasks take turns a step each; a tenant's share is bounded by how many it may
/// have running (the API's caps), and the pick is one probe of a small index
/// however many tasks run.
pub async fn step(db: &mut deadpool_postgres::Client, batch: i64) -> Result<Option<Stepped>, StoreError> {
    let tx = db.transaction().await?;
    let Some(row) = tx
        .query_opt(
            // A broadcast has a runner of its own (store::broadcast).
            "SELECT t.tenant_id, t.id, t.kind, t.app_id, t.endpoint_id, t.since, t.until, t.filter, t.cursor
             FROM background_tasks t
             WHERE t.status = 0 AND t.kind <> $1
             ORDER BY t.updated_at
             LIMIT 1
             FOR UPDATE OF t SKIP LOCKED",
            &[&TaskKind::Broadcast.code()],
        )
        .await?
    else {
        return Ok(None);
    };
    let tenant = TenantId::from_db(row.get("tenant_id"));
    let task = TaskId::from_db(row.get("id"));
    let kind = TaskKind::from_db(row.get("kind"));
    // Every running task names its application: only statistics (recorded
    // finished) are the whole tenant's.
    let app = AppId::from_db(row.get::<_, Option<String>>("app_id").unwrap_or_default());
    // A purge names no endpoint: '' (not NULL, so a runner of the release
    // before it reads the row, finds no such endpoint and fails the task rather
    // than its own loop).
    let endpoint = row.get::<_, Option<String>>("endpoint_id").filter(|e| !e.is_empty()).map(EndpointId::from_db);
    let window = Window { since: row.get("since"), until: row.get("until"), after: row.get("cursor") };
    let filter: serde_json::Value = row.get("filter");

    // The step's work runs under a savepoint: a step that fails (a statement
    // timing out on a heavy batch, a value Postgres refuses) is undone alone, and
    // the task goes to the back of the line, so it cannot hold up the others. It
    // fails the task only when it keeps failing: [`MOST_TRIES`] times in a row
    // over at least [`FAILING_FOR`], so a database's blip of a few seconds ends
    // no task. Its cause goes to the log, not to the tenant.
    tx.batch_execute("SAVEPOINT step").await?;
    let done = match work(&*tx, &tenant, &app, endpoint.as_ref(), kind, &window, &filter, batch).await {
        Ok(done) => done,
        Err(e) => {
            tx.batch_execute("ROLLBACK TO SAVEPOINT step").await?;
            tx.execute(
                "UPDATE background_tasks SET tries = tries + 1, updated_at = now(),
                     failing_since = COALESCE(failing_since, now()),
                     status = CASE WHEN tries + 1 >= $3::smallint AND failing_since < now() - $4::text::interval THEN 2 ELSE status END,
                     failure = CASE WHEN tries + 1 >= $3::smallint AND failing_since < now() - $4::text::interval THEN $5
                                    ELSE failure END
                 WHERE tenant_id = $1 AND id = $2",
                &[&tenant.as_str(), &task.as_str(), &MOST_TRIES, &FAILING_FOR, &KEPT_FAILING],
            )
            .await?;
            let status = tx
                .query_one(
                    "SELECT status FROM background_tasks WHERE tenant_id = $1 AND id = $2",
                    &[&tenant.as_str(), &task.as_str()],
                )
                .await?;
            tx.commit().await?;
            let status = TaskStatus::from_db(status.get(0));
            return Ok(Some(Stepped { tenant, task, kind, sent: 0, status, failed: Some(e) }));
        }
    };
    let status = match done.failure {
        Some(_) => TaskStatus::Failed,
        None if done.scanned < batch => TaskStatus::Finished,
        None => TaskStatus::Running,
    };
    tx.execute(
        "UPDATE background_tasks SET cursor = COALESCE($3, cursor), scanned = scanned + $4, sent = sent + $5,
             status = $6, failure = $7, tries = 0, failing_since = NULL, updated_at = now()
         WHERE tenant_id = $1 AND id = $2",
        &[&tenant.as_str(), &task.as_str(), &done.last, &done.scanned, &done.sent, &status.code(), &done.failure],
    )
    .await?;
    tx.commit().await?;
    Ok(Some(Stepped { tenant, task, kind, sent: done.sent as u64, status, failed: None }))
}

/// Steps in a row that may fail before the task does…
const MOST_TRIES: i16 = 5;
/// …and for how long they must have kept failing.
const FAILING_FOR: &str = "1 minute";
/// What a task that kept failing says; the log has each step's cause.
const KEPT_FAILING: &str = "its steps kept failing (the operator's logs say why); start it again to go on";

/// What a step's batch did.
struct Done {
    /// The last message id looked at.
    last: Option<String>,
    scanned: i64,
    sent: i64,
    /// Why the task cannot go on.
    failure: Option<&'static str>,
}

/// The step's batch, after checking the endpoint can still take it.
#[allow(clippy::too_many_arguments)]
async fn work(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: Option<&EndpointId>,
    kind: TaskKind,
    window: &Window,
    filter: &serde_json::Value,
    batch: i64,
) -> Result<Done, StoreError> {
    let Some(endpoint) = endpoint else {
        if kind != TaskKind::PurgeContent {
            return Ok(Done { last: None, scanned: 0, sent: 0, failure: Some("the task names no endpoint") });
        }
        let (last, scanned, sent) = purge_batch(tx, tenant, app, window, batch).await?;
        return Ok(Done { last, scanned, sent, failure: None });
    };
    let filter = ReplayFilter::deserialize(filter).map_err(|e| StoreError::Corrupt(format!("a task's filter: {e}")))?;
    // The endpoint is held (FOR KEY SHARE) for the step: deleted meanwhile, the
    // deletion waits for this step or went first, and the task ends failed.
    let endpoint_row = tx
        .query_opt(
            "SELECT disabled FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR KEY SHARE",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str()],
        )
        .await?;
    let failure = match endpoint_row.map(|r| r.get::<_, bool>(0)) {
        None => Some("the endpoint was deleted"),
        // A delivery to a disabled endpoint ends unsent: replaying into one would
        // use up what it is to get. Replaying again once it is enabled sends only
        // what it has not had.
        Some(true) => Some("the endpoint was disabled; enable it and replay again"),
        Some(false) => None,
    };
    if failure.is_some() {
        return Ok(Done { last: None, scanned: 0, sent: 0, failure });
    }
    let (last, scanned, sent) = match kind {
        TaskKind::Replay => missing_batch(tx, tenant, app, endpoint, window, batch).await?,
        TaskKind::BulkReplay => again_batch(tx, tenant, app, endpoint, window, &filter, batch).await?,
        TaskKind::Recover => recover_batch(tx, tenant, app, endpoint, window, batch).await?,
        TaskKind::PurgeContent
        | TaskKind::AppStats
        | TaskKind::EventTypeAggregate
        | TaskKind::Broadcast
        | TaskKind::SdkGenerate => {
            return Ok(Done { last: None, scanned: 0, sent: 0, failure: Some("the task is not an endpoint's") })
        }
    };
    Ok(Done { last, scanned, sent, failure: None })
}

/// The task's window and where its last step stopped.
struct Window {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    /// The last message id looked at ('' before the first step).
    after: String,
}

impl Window {
    /// The message ids that can fall in the window, for the scan's bounds.
    fn ids(&self) -> (String, String) {
        (ids::floor(MessageId::PREFIX, self.since - ID_MARGIN), ids::floor(MessageId::PREFIX, self.until + ID_MARGIN))
    }
}

/// The CTE `scanned`: the next `$7` deliveries to the endpoint (`$1`, `$2`, `$3`)
/// after the cursor `$4`, of messages with ids in `[$5, $6)`, in message order.
const SCANNED_DELIVERIES: &str = "scanned AS (
    SELECT d.msg_id, d.status, d.lease_token, d.attempts FROM deliveries d
    WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.endpoint_id = $3
      AND d.msg_id > $4 AND d.msg_id >= $5 AND d.msg_id < $6
    ORDER BY d.msg_id LIMIT $7)";

/// A step's answer, from `scanned` and `dels`: the last id looked at, how many,
/// and how many deliveries were made due.
const SCANNED_AND_DUE: &str = "SELECT (SELECT max(msg_id) FROM scanned) AS last_id,
    (SELECT count(*) FROM scanned) AS scanned_count, (SELECT count(*) FROM dels) AS due_count";

/// A content purge: the next `batch` messages of the application in id order,
/// made before the task, lose their payloads (and the inbound events' copies),
/// as `erasure::expunge_message` does one. Returns the last id looked at, how
/// many, and how many payloads were erased.
async fn purge_batch(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    w: &Window,
    batch: i64,
) -> Result<(Option<String>, i64, i64), StoreError> {
    let hi = ids::floor(MessageId::PREFIX, w.until + ID_MARGIN);
    let row = tx
        .query_one(
            "WITH scanned AS (
                SELECT m.id FROM messages m
                WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id > $3 AND m.id < $4
                ORDER BY m.id LIMIT $5
             ), purged AS (
                UPDATE messages m SET payload = NULL, payload_expires_at = NULL FROM scanned s
                WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = s.id
                  AND m.payload IS NOT NULL AND m.created_at <= $6
                RETURNING m.tenant_id, m.id, m.event_id
             ), inbound AS (
                UPDATE inbound_events e SET payload = NULL FROM purged p
                WHERE e.tenant_id = p.tenant_id AND e.msg_id = p.id AND e.id = p.event_id
                  AND e.source_id IN (SELECT src.id FROM sources src WHERE src.tenant_id = $1)
             )
             SELECT (SELECT max(id) FROM scanned) AS last_id, (SELECT count(*) FROM scanned) AS scanned_count,
                    (SELECT count(*) FROM purged) AS purged_count",
            &[&tenant.as_str(), &app.as_str(), &w.after, &hi, &batch, &w.until],
        )
        .await?;
    Ok((row.get("last_id"), row.get("scanned_count"), row.get("purged_count")))
}

/// Replay-missing: the next `batch` messages of the application in id order; of
/// those in the window that the endpoint's filters take (the fan-out's rule,
/// whatever the endpoint's state when they were made), each with no delivery to
/// it, or one that ended unsent (no attempt), gets a due delivery on the normal
/// schedule. Returns the last id looked at, how many, and how many made due.
async fn missing_batch(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    w: &Window,
    batch: i64,
) -> Result<(Option<String>, i64, i64), StoreError> {
    let (lo, hi) = w.ids();
    let row = tx
        .query_one(
            &format!(
                "WITH input AS (SELECT $2::text AS a), {}, scanned AS (
                    SELECT m.id, m.event_type, m.channels, m.created_at, m.payload IS NOT NULL AS live, m.payload
                    FROM messages m
                    WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id > $4 AND m.id >= $5 AND m.id < $6
                    ORDER BY m.id LIMIT $7
                    FOR KEY SHARE OF m
                 ), wanted AS (
                    SELECT s.id FROM scanned s
                    JOIN endpoints e ON e.tenant_id = $1 AND e.app_id = $2 AND e.id = $3
                        AND (e.event_types IS NULL OR s.event_type = ANY (e.event_types))
                        AND (e.channels IS NULL OR e.channels && s.channels)
                        {}
                    WHERE s.live AND s.created_at >= $8 AND s.created_at < $9 AND EXISTS (SELECT 1 FROM locked_apps)
                 ), dels AS (
                    INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, next_attempt_at)
                    SELECT $1, $2, w.id, $3, now() FROM wanted w
                    ON CONFLICT (tenant_id, app_id, msg_id, endpoint_id) DO UPDATE
                        SET status = 1, next_attempt_at = now(), trigger = 0, lease_token = NULL, leased_until = NULL
                        WHERE deliveries.status = 2 AND deliveries.attempts = 0
                    RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
                 ), {}
                 SELECT (SELECT max(id) FROM scanned) AS last_id, (SELECT count(*) FROM scanned) AS scanned_count,
                        (SELECT count(*) FROM dels) AS due_count",
                super::parents::lock_apps("$1", "input", "a"),
                super::fanout::passes("s"),
                wakes::lower("dels")
            ),
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &w.after, &lo, &hi, &batch, &w.since, &w.until],
        )
        .await?;
    Ok((row.get("last_id"), row.get("scanned_count"), row.get("due_count")))
}

/// Bulk replay: the next `batch` deliveries to the endpoint in message order; each
/// whose message is in the window and passes the filters is made due now as a
/// manual attempt (one still in its retry schedule keeps it, and is brought
/// forward). One in flight is left to its attempt. Returns as `missing_batch`.
async fn again_batch(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    w: &Window,
    f: &ReplayFilter,
    batch: i64,
) -> Result<(Option<String>, i64, i64), StoreError> {
    let (lo, hi) = w.ids();
    let row = tx
        .query_one(
            &format!(
                "WITH {SCANNED_DELIVERIES}, wanted AS (
                    SELECT s.msg_id FROM scanned s
                    JOIN messages m ON m.tenant_id = $1 AND m.app_id = $2 AND m.id = s.msg_id
                    WHERE NOT (s.status = 1 AND s.lease_token IS NOT NULL) AND m.payload IS NOT NULL
                      AND m.created_at >= $8 AND m.created_at < $9
                      AND ($10::text[] IS NULL OR m.event_type = ANY ($10))
                      AND ($11::text IS NULL OR $11 = ANY (m.channels))
                      AND ($12::text IS NULL OR $12 = ANY (m.tags))
                      -- The status as the lists show it (`deliveries::SHOWN_STATUS`): a
                      -- delivery waiting for its retry is `sending` (3), not `pending`.
                      AND ($13::smallint IS NULL OR $13 = CASE WHEN s.status = 1 AND s.attempts > 0 THEN 3 ELSE s.status END)
                      AND ($14::int IS NULL OR $14 = COALESCE((
                            SELECT a.response_status_code / 100 * 100 FROM attempts a
                            WHERE a.tenant_id = $1 AND a.app_id = $2 AND a.msg_id = s.msg_id AND a.endpoint_id = $3
                            ORDER BY a.id DESC LIMIT 1), -1))
                    FOR KEY SHARE OF m
                 ), dels AS (
                    UPDATE deliveries d SET status = 1, next_attempt_at = now(), lease_token = NULL, leased_until = NULL,
                        trigger = CASE WHEN d.status = 1 THEN d.trigger ELSE 1 END
                    FROM wanted w
                    WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.msg_id = w.msg_id AND d.endpoint_id = $3
                      AND NOT (d.status = 1 AND d.lease_token IS NOT NULL)
                    RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at
                 ), {}
                 {SCANNED_AND_DUE}",
                wakes::lower("dels")
            ),
            &[
                &tenant.as_str(),
                &app.as_str(),
                &endpoint.as_str(),
                &w.after,
                &lo,
                &hi,
                &batch,
                &w.since,
                &w.until,
                &f.event_types,
                &f.channel,
                &f.tag,
                &f.status,
                &f.status_code_class,
            ],
        )
        .await?;
    Ok((row.get("last_id"), row.get("scanned_count"), row.get("due_count")))
}

/// Recover: the next `batch` deliveries to the endpoint in message order; each
/// that failed, of a message in the window whose payload is still kept, starts
/// its retry schedule again from the first attempt. Returns as `missing_batch`.
async fn recover_batch(
    tx: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    w: &Window,
    batch: i64,
) -> Result<(Option<String>, i64, i64), StoreError> {
    let (lo, hi) = w.ids();
    let row = tx
        .query_one(
            &format!(
                "WITH {SCANNED_DELIVERIES}, wanted AS (
                    SELECT s.msg_id FROM scanned s
                    JOIN messages m ON m.tenant_id = $1 AND m.app_id = $2 AND m.id = s.msg_id
                    WHERE s.status = 2 AND m.payload IS NOT NULL AND m.created_at >= $8 AND m.created_at < $9
                    FOR KEY SHARE OF m
                 ), dels AS (
                    UPDATE deliveries d SET status = 1, attempts = 0, next_attempt_at = now(), trigger = 0,
                        lease_token = NULL, leased_until = NULL
                    FROM wanted w
                    WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.msg_id = w.msg_id AND d.endpoint_id = $3
                      AND d.status = 2
                    RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at
                 ), {}
                 {SCANNED_AND_DUE}",
                wakes::lower("dels")
            ),
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &w.after, &lo, &hi, &batch, &w.since, &w.until],
        )
        .await?;
    Ok((row.get("last_id"), row.get("scanned_count"), row.get("due_count")))
}
