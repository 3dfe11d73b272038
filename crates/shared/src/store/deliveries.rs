//! The `deliveries` table, the outbox: one row per (message, endpoint).
//!
//! Workers claim due rows with `FOR UPDATE SKIP LOCKED`; a claim sets the row's
//! lease (`leased_until`, with its fencing token) and nothing indexed, so a row
//! whose worker died is due again by itself when its lease ends. A pending row
//! under a lease is what the API calls sending. Results are written back in
//! batches.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::GenericClient;

use super::operational::AttemptNotice;
use super::wakes;
use super::StoreError;
use crate::{
    ids::{AppId, AttemptId, EndpointId, MessageId, TenantId},
    status::{DeliveryStatus, EndpointKind, Trigger},
};

/// A delivery's status as the API shows it, of `deliveries d`: a pending one
/// that was tried and waits for its next try, or is claimed and not yet recorded
/// (its fencing token set, whether or not its lease has run out), is being sent
/// (Svix's `sending`, 3, which Svix shows whenever a retry is scheduled); no
/// status column says so (neither a claim nor a retry writes an indexed column).
pub const SHOWN_STATUS: &str =
    "CASE WHEN d.status = 1 AND (d.lease_token IS NOT NULL OR d.attempts > 0) THEN 3::smallint ELSE d.status END";

/// When a delivery is next tried, as the API shows it: a sending one, when its
/// lease ends.
pub const SHOWN_NEXT_ATTEMPT: &str =
    "CASE WHEN d.status = 1 AND d.lease_token IS NOT NULL THEN d.leased_until ELSE d.next_attempt_at END";

/// A claimed delivery with everything needed to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub msg_id: MessageId,
    pub endpoint_id: EndpointId,
    /// The claim's fencing token: results are written only while it is the row's.
    pub lease: i64,
    /// No later than the lease's end as Postgres counts it (taken before the
    /// claim's transaction began): past it, another worker may take the row.
    pub lease_ends: std::time::Instant,
    /// Attempts made so far in this schedule run.
    pub attempts: i32,
    pub trigger: Trigger,
    /// When the delivery fell due: the start of its lag.
    pub due_at: DateTime<Utc>,
    /// The application's `throttleRate`, shared by all its endpoints.
    pub app_throttle_rate: Option<i32>,
    /// `None` when the payload expired or was expunged, or the message is gone: nothing is sent.
    pub payload: Option<Vec<u8>>,
    pub content_type: String,
    /// The message's `Idempotency-Key`, when it is not the message id.
    pub idempotency_key: Option<String>,
    /// The tenant's choice: also send the `svix-*` header aliases.
    pub svix_headers: bool,
    /// The W3C trace context of the request that created the message, if traced.
    pub traceparent: Option<String>,
    /// The message's event type ('' if the message is gone).
    pub event_type: String,
    /// The message's own id from its sender (`eventId`), its channels, and when it
    /// was created: what a destination's record carries besides the payload.
    pub event_id: Option<String>,
    pub channels: Option<Vec<String>>,
    pub created_at: Option<DateTime<Utc>>,
    /// `None` if the endpoint was deleted since the message was created.
    pub endpoint: Option<ClaimedEndpoint>,
    /// Claimed by key, from a hint, rather than from its endpoint's due queue.
    pub by_hint: bool,
}

#[derive(Debug, Clone)]
pub struct ClaimedEndpoint {
    pub url: String,
    pub disabled: bool,
    pub throttle_rate: Option<i32>,
    pub headers: Value,
    pub secret: Vec<u8>,
    pub old_secret: Option<Vec<u8>>,
    pub old_secret_until: Option<DateTime<Utc>>,
    /// When its transformation last changed, if it has one in force (enabled,
    /// with code, its tenant allowed transformations).
    pub transformation_at: Option<DateTime<Utc>>,
    /// An HTTP endpoint, or a destination of another kind.
    pub kind: EndpointKind,
    /// A destination's configuration, sealed.
    pub destination: Option<Vec<u8>>,
    /// When its OAuth client, client certificate or server CA last changed, if it
    /// has any (`endpoint_auth` then holds them).
    pub auth_at: Option<DateTime<Utc>>,
}

/// The columns of each delivery a claim took, for [`claimed_from_row`]: reads the
/// CTE `claimed` (the rows taken, with their `due_at`). `messages` narrows the
/// message lookup (for example to a range of ids, so only its partitions are read).
pub(super) fn claimed_rows(messages: &str) -> String {
    format!(
        "SELECT c.tenant_id, c.app_id, c.msg_id, c.endpoint_id, c.attempts, c.trigger,
        m.payload, COALESCE(m.content_type, 'application/json') AS content_type,
        e.url, e.disabled, e.throttle_rate, e.headers, e.secret, e.old_secret, e.old_secret_until, c.due_at,
        a.throttle_rate AS app_throttle_rate, m.idempotency_key, t.svix_headers, m.traceparent,
        CASE WHEN t.transformations AND NOT t.transformations_off THEN e.transformation_at END AS transformation_at,
        COALESCE(m.event_type, '') AS event_type, e.kind, e.destination, m.event_id, m.channels, m.created_at,
        e.auth_at
     FROM claimed c
     JOIN tenants t ON t.id = c.tenant_id
     JOIN applications a ON a.tenant_id = c.tenant_id AND a.id = c.app_id
     LEFT JOIN messages m ON m.tenant_id = c.tenant_id AND m.app_id = c.app_id AND m.id = c.msg_id {messages}
     LEFT JOIN endpoints e ON e.tenant_id = c.tenant_id AND e.app_id = c.app_id AND e.id = c.endpoint_id"
    )
}

/// A claimed delivery from a row of [`claimed_rows`].
pub(super) fn claimed_from_row(r: &tokio_postgres::Row, token: i64, lease_ends: std::time::Instant) -> Claimed {
    let url: Option<String> = r.get("url");
    Claimed {
        tenant_id: TenantId::from_db(r.get("tenant_id")),
        app_id: AppId::from_db(r.get("app_id")),
        msg_id: MessageId::from_db(r.get("msg_id")),
        endpoint_id: EndpointId::from_db(r.get("endpoint_id")),
        lease: token,
        lease_ends,
        attempts: r.get("attempts"),
        trigger: Trigger::from_db(r.get("trigger")),
        due_at: r.get("due_at"),
        app_throttle_rate: r.get("app_throttle_rate"),
        idempotency_key: r.get("idempotency_key"),
        svix_headers: r.get("svix_headers"),
        traceparent: r.get("traceparent"),
        event_type: r.get("event_type"),
        event_id: r.get("event_id"),
        channels: r.get("channels"),
        created_at: r.get("created_at"),
        payload: r.get("payload"),
        content_type: r.get("content_type"),
        by_hint: false,
        endpoint: url.map(|url| ClaimedEndpoint {
            url,
            disabled: r.get("disabled"),
            throttle_rate: r.get("throttle_rate"),
            headers: r.get("headers"),
            secret: r.get("secret"),
            old_secret: r.get("old_secret"),
            old_secret_until: r.get("old_secret_until"),
            transformation_at: r.get("transformation_at"),
            kind: EndpointKind::from_db(r.get("kind")),
            destination: r.get("destination"),
            auth_at: r.get("auth_at"),
        }),
    }
}

/// One attempt's record.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub id: AttemptId,
    pub url: String,
    pub success: bool,
    pub status_code: i16,
    pub response: String,
    pub duration_ms: i64,
    /// When it ended: what endpoint health goes by, whenever it is recorded.
    pub at: DateTime<Utc>,
    /// The request's headers as a JSON object (sensitive values redacted).
    pub request_headers: String,
    /// The request body's size, for usage.
    pub bytes: i64,
}

/// What became of one claimed delivery.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub msg_id: MessageId,
    pub endpoint_id: EndpointId,
    /// The fencing token of the claim this outcome belongs to.
    pub lease: i64,
    pub trigger: Trigger,
    /// `None` when no request was made (endpoint gone or disabled).
    pub attempt: Option<AttemptRecord>,
    /// The delivery's new status and, if pending, when it is next due.
    pub status: DeliveryStatus,
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The endpoint answered 410 Gone: disable it.
    pub disable_endpoint: bool,
    /// What the attempt tells the operational webhooks, if anything.
    pub notice: Option<AttemptNotice>,
}

/// What a batch of outcomes changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Endpoints this batch disabled.
    pub disabled: u64,
    /// Outcomes whose claim had passed to another worker: their attempts are kept
    /// (they happened), their delivery state is not written.
    pub stale: u64,
    /// Deliveries of operational webhooks the batch made (the workers are woken).
    pub operational: u64,
}

/// Makes a re-enabled tenant's paused deliveries due now; returns how many.
pub async fn resume_tenant(db: &impl GenericClient, tenant: &TenantId) -> Result<u64, StoreError> {
    let row = db
        .query_one(
            &format!(
                "WITH resumed AS (
                    UPDATE deliveries SET next_attempt_at = now()
                    WHERE tenant_id = $1 AND status = 1 AND next_attempt_at IS NULL
                    RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
                 ), {}
                 SELECT count(*) FROM resumed",
                wakes::lower("resumed")
            ),
            &[&tenant.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Makes paused deliveries of tenants enabled again lately due now, at most
/// `limit` per call; returns how many. `resume_tenant` does this at once when the
/// operator re-enables a tenant, but a claim that read the tenant as disabled just
/// before (a statement of at most a few seconds) can pause rows after it ran:
/// this sweep, run periodically, catches those. It looks only at tenants enabled
/// again in the last two minutes (`enabled_at`), so the paused rows of tenants
/// still disabled (or deleted), and tenants never disabled, cost it nothing.
pub async fn resume_enabled(db: &impl GenericClient, limit: i64) -> Result<u64, StoreError> {
    let row = db
        .query_one(
            &format!(
                "WITH resumed AS (
                    UPDATE deliveries d SET next_attempt_at = now()
                    FROM (SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id
                          FROM tenants t JOIN deliveries d ON d.tenant_id = t.id
                          WHERE NOT t.disabled AND t.deleted_at IS NULL
                            AND t.enabled_at > now() - interval '2 minutes'
                            AND d.status = 1 AND d.next_attempt_at IS NULL
                          LIMIT $1 FOR UPDATE OF d SKIP LOCKED) r
                    WHERE d.tenant_id = r.tenant_id AND d.app_id = r.app_id AND d.msg_id = r.msg_id
                      AND d.endpoint_id = r.endpoint_id AND d.status = 1 AND d.next_attempt_at IS NULL
                    RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.next_attempt_at
                 ), {}
                 SELECT count(*) FROM resumed",
                wakes::lower("resumed")
            ),
            &[&limit],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Marks a claimed delivery failed without an attempt row: the last resort for a
/// result that cannot be recorded, so that it is neither lost from sight nor sent
/// again and again. It stays listable and can be resent. Returns whether it existed.
pub async fn quarantine(db: &impl GenericClient, o: &Outcome) -> Result<bool, StoreError> {
    let n = db
        .execute(
            // An attempt that was made counts though its row could not be
            // written: replay-missing takes only deliveries that ended unsent
            // (`attempts = 0`) and must not send this one again.
            "UPDATE deliveries SET status = 2, next_attempt_at = NULL, last_attempt_at = now(), trigger = 0,
                lease_token = NULL, leased_until = NULL, attempts = attempts + $6
             WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND endpoint_id = $4 AND lease_token = $5",
            &[
                &o.tenant_id.as_str(),
                &o.app_id.as_str(),
                &o.msg_id.as_str(),
                &o.endpoint_id.as_str(),
                &o.lease,
                &(o.attempt.is_some() as i32),
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Deliveries waiting or in flight, for `hookgate_deliveries_pending`.
pub async fn pending_count(db: &impl GenericClient) -> Result<i64, StoreError> {
    // Paused deliveries (a disabled or deleted tenant's: no due time) are not
    // waiting to be sent, so they are not counted.
    let row = db
        .query_one("SELECT count(*) FROM deliveries WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL", &[])
        .await?;
    Ok(row.get(0))
}

/// Schedules one manual attempt of a message to an endpoint (false: the message
/// is gone), creating the delivery
/// if the endpoint was not a destination before. A delivery still in its retry
/// schedule (pending or sending) keeps it: the resend brings its next attempt
/// forward, and if that fails the schedule goes on; a finished one gets one
/// manual attempt. Clearing the fencing token makes
/// a worker still holding the delivery stale: its late result cannot undo this.
pub async fn resend(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
    endpoint: &EndpointId,
) -> Result<bool, StoreError> {
    // The message is held (FOR KEY SHARE) while the delivery is written: a pruner
    // deleting it waits, or has deleted it already and nothing is written; no
    // delivery outlives its message (no foreign key says so any more). Its
    // application too (`store::parents`), for an erasure's last step.
    let row = db
        .query_one(
            &format!(
                "WITH input AS (SELECT $2::text AS a), {}, resent AS (
                    INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, status, next_attempt_at, trigger)
                    SELECT $1, $2, $3, $4, 1, now(), 1 FROM messages
                    WHERE tenant_id = $1 AND app_id = $2 AND id = $3 AND EXISTS (SELECT 1 FROM locked_apps)
                    FOR KEY SHARE
                    ON CONFLICT (tenant_id, app_id, msg_id, endpoint_id) DO UPDATE
                        SET status = 1, next_attempt_at = now(), lease_token = NULL, leased_until = NULL,
                            trigger = CASE WHEN deliveries.status IN (1, 3) THEN deliveries.trigger ELSE 1 END
                    RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
                 ), {}
                 SELECT count(*) FROM resent",
                super::parents::lock_apps("$1", "input", "a"),
                wakes::lower("resent")
            ),
            &[&tenant.as_str(), &app.as_str(), &msg.as_str(), &endpoint.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>(0) == 1)
}

/// Schedules one manual attempt of a message to every endpoint it went to (a replay);
/// deliveries still in their schedule keep it, as with `resend`.
/// Returns how many deliveries.
pub async fn replay_message(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
) -> Result<u64, StoreError> {
    let row = db
        .query_one(
            &format!(
                "WITH replayed AS (
                    UPDATE deliveries SET status = 1, next_attempt_at = now(), lease_token = NULL, leased_until = NULL,
                        trigger = CASE WHEN status IN (1, 3) THEN trigger ELSE 1 END
                    WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3
                      AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = $3
                          AND m.payload IS NOT NULL)
                    RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
                 ), {}
                 SELECT count(*) FROM replayed",
                wakes::lower("replayed")
            ),
            &[&tenant.as_str(), &app.as_str(), &msg.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Counts of the endpoint's deliveries by status, in `[since, until)`.
pub async fn stats(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
) -> Result<HashMap<DeliveryStatus, i64>, StoreError> {
    let rows = db
        .query(
            &format!(
                "SELECT {SHOWN_STATUS} AS shown_status, count(*) AS n FROM deliveries d
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
               AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
             GROUP BY 1"
            ),
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until],
        )
        .await?;
    Ok(rows.iter().map(|r| (DeliveryStatus::from_db(r.get("shown_status")), r.get("n"))).collect())
}
