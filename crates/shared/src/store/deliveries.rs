//! The `deliveries` table, the outbox: one row per (message, endpoint).
//!
//! Workers claim due rows with `FOR UPDATE SKIP LOCKED`; claiming pushes
//! `next_attempt_at` out by the lease, so a row whose worker died becomes due
//! again by itself. Results are written back in batches.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::GenericClient;

use super::operational::{self, AttemptNotice, Notice};
use super::usage::{self, Counter};
use super::StoreError;
use crate::{
    ids::{AppId, AttemptId, EndpointId, MessageId, TenantId},
    status::{DeliveryStatus, Trigger},
};

/// A claimed delivery with everything needed to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub tenant_id: TenantId,
    pub app_id: AppId,
    pub msg_id: MessageId,
    pub endpoint_id: EndpointId,
    /// The claim's fencing token: results are written only while it is the row's.
    pub lease: i64,
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
    /// `None` if the endpoint was deleted since the message was created.
    pub endpoint: Option<ClaimedEndpoint>,
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
}

/// The columns of each delivery a claim took, for [`claimed_from_row`]: reads the
/// CTE `claimed` (the rows taken, with their `due_at`).
pub(super) const CLAIMED_ROWS: &str = "SELECT c.tenant_id, c.app_id, c.msg_id, c.endpoint_id, c.attempts, c.trigger,
        m.payload, COALESCE(m.content_type, 'application/json'),
        e.url, e.disabled, e.throttle_rate, e.headers, e.secret, e.old_secret, e.old_secret_until, c.due_at,
        a.throttle_rate, m.idempotency_key, t.svix_headers, m.traceparent
     FROM claimed c
     JOIN tenants t ON t.id = c.tenant_id
     JOIN applications a ON a.tenant_id = c.tenant_id AND a.id = c.app_id
     LEFT JOIN messages m ON m.tenant_id = c.tenant_id AND m.app_id = c.app_id AND m.id = c.msg_id
     LEFT JOIN endpoints e ON e.tenant_id = c.tenant_id AND e.app_id = c.app_id AND e.id = c.endpoint_id";

/// A claimed delivery from a row of [`CLAIMED_ROWS`].
pub(super) fn claimed_from_row(r: &tokio_postgres::Row, token: i64) -> Claimed {
    let url: Option<String> = r.get(8);
    Claimed {
        tenant_id: TenantId::from_db(r.get(0)),
        app_id: AppId::from_db(r.get(1)),
        msg_id: MessageId::from_db(r.get(2)),
        endpoint_id: EndpointId::from_db(r.get(3)),
        lease: token,
        attempts: r.get(4),
        trigger: Trigger::from_db(r.get(5)),
        due_at: r.get(15),
        app_throttle_rate: r.get(16),
        idempotency_key: r.get(17),
        svix_headers: r.get(18),
        traceparent: r.get(19),
        payload: r.get(6),
        content_type: r.get(7),
        endpoint: url.map(|url| ClaimedEndpoint {
            url,
            disabled: r.get(9),
            throttle_rate: r.get(10),
            headers: r.get(11),
            secret: r.get(12),
            old_secret: r.get(13),
            old_secret_until: r.get(14),
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

/// Writes a batch of outcomes in one transaction: attempts, delivery states (each
/// only while its claim's token is still the row's), and endpoint health (success
/// clears the failure streak; failing longer than `disable_after`, or a 410,
/// disables).
pub async fn record(
    db: &mut deadpool_postgres::Client,
    outcomes: &[Outcome],
    disable_after: Duration,
) -> Result<Recorded, StoreError> {
    let tx = db.transaction().await?;
    // The batch's message ids as a range too: these statements are prepared, and a
    // generic plan prunes partitions by scalar parameters (not by an array's).
    let lo = outcomes.iter().map(|o| o.msg_id.as_str()).min().unwrap_or_default();
    let hi = outcomes.iter().map(|o| o.msg_id.as_str()).max().unwrap_or_default();
    let attempted: Vec<&Outcome> = outcomes.iter().filter(|o| o.attempt.is_some()).collect();
    if !attempted.is_empty() {
        let col = |f: fn(&Outcome) -> String| attempted.iter().map(|o| f(o)).collect::<Vec<String>>();
        let a = |o: &Outcome| o.attempt.clone().expect("filtered");
        let statement = tx
            .prepare_cached(&format!(
                // Idempotent (a commit whose acknowledgement was lost is retried with the
                // same attempt ids: usage counts only the attempts this statement
                // inserted), and an attempt of a message deleted meanwhile is dropped
                // rather than failing the batch on its foreign key.
                "WITH u AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::smallint[], $8::smallint[], $9::smallint[], $10::text[], $11::bigint[], $12::text[],
                    $15::bigint[])
                    AS u(tenant_id, app_id, id, msg_id, endpoint_id, url, status, trigger_type, code, response, ms,
                        headers, bytes)
             ), ins AS (
                INSERT INTO attempts (tenant_id, app_id, id, msg_id, endpoint_id, url, status, trigger_type,
                    response_status_code, response, response_duration_ms, request_headers)
                SELECT u.tenant_id, u.app_id, u.id, u.msg_id, u.endpoint_id, u.url, u.status, u.trigger_type, u.code,
                    u.response, u.ms, u.headers::jsonb
                FROM u
                WHERE EXISTS (SELECT 1 FROM messages m
                    WHERE m.id = ANY ($4) AND m.id BETWEEN $13 AND $14
                      AND m.tenant_id = u.tenant_id AND m.app_id = u.app_id AND m.id = u.msg_id)
                ON CONFLICT (tenant_id, app_id, msg_id, id) DO NOTHING
                RETURNING tenant_id, id, status
             ), counted AS (SELECT ins.tenant_id, ins.status, u.bytes FROM ins JOIN u ON u.id = ins.id), {}
             SELECT 1",
                usage::bump(
                    "usage",
                    "counted",
                    &[
                        (Counter::AttemptsSucceeded, "count(*) FILTER (WHERE status = 0)"),
                        (Counter::AttemptsFailed, "count(*) FILTER (WHERE status <> 0)"),
                        (Counter::BytesOut, "sum(bytes)"),
                    ],
                )
            ))
            .await?;
        tx.execute(
            &statement,
            &[
                &col(|o| o.tenant_id.to_string()),
                &col(|o| o.app_id.to_string()),
                &col(|o| o.attempt.as_ref().expect("filtered").id.to_string()),
                &col(|o| o.msg_id.to_string()),
                &col(|o| o.endpoint_id.to_string()),
                &attempted.iter().map(|o| a(o).url).collect::<Vec<_>>(),
                &attempted
                    .iter()
                    .map(|o| if a(o).success { DeliveryStatus::Success } else { DeliveryStatus::Failed }.code())
                    .collect::<Vec<i16>>(),
                &attempted.iter().map(|o| o.trigger.code()).collect::<Vec<i16>>(),
                &attempted.iter().map(|o| a(o).status_code).collect::<Vec<i16>>(),
                &attempted.iter().map(|o| a(o).response).collect::<Vec<_>>(),
                &attempted.iter().map(|o| a(o).duration_ms).collect::<Vec<i64>>(),
                &attempted.iter().map(|o| a(o).request_headers).collect::<Vec<_>>(),
                &lo,
                &hi,
                &attempted.iter().map(|o| a(o).bytes).collect::<Vec<i64>>(),
            ],
        )
        .await?;
    }
    let s = |f: fn(&Outcome) -> String| outcomes.iter().map(f).collect::<Vec<String>>();
    let statement = tx
        .prepare_cached(
            "WITH applied AS (
                UPDATE deliveries d SET status = u.status, next_attempt_at = u.next, last_attempt_at = now(),
                    attempts = d.attempts + u.tried, trigger = 0, lease_token = NULL
                FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::timestamptz[],
                        $7::int[], $8::bigint[], $11::bool[])
                    AS u(tenant_id, app_id, msg_id, endpoint_id, status, next, tried, token, noticed)
                WHERE d.msg_id = ANY ($3) AND d.msg_id BETWEEN $9 AND $10
                  AND d.tenant_id = u.tenant_id AND d.app_id = u.app_id
                  AND d.msg_id = u.msg_id AND d.endpoint_id = u.endpoint_id AND d.lease_token = u.token
                RETURNING d.msg_id, d.endpoint_id, u.noticed
             )
             SELECT count(*), array_agg(msg_id || ' ' || endpoint_id) FILTER (WHERE noticed) FROM applied",
        )
        .await?;
    let row = tx
        .query_one(
            &statement,
            &[
                &s(|o| o.tenant_id.to_string()),
                &s(|o| o.app_id.to_string()),
                &s(|o| o.msg_id.to_string()),
                &s(|o| o.endpoint_id.to_string()),
                &outcomes.iter().map(|o| o.status.code()).collect::<Vec<i16>>(),
                &outcomes.iter().map(|o| o.next_attempt_at).collect::<Vec<Option<DateTime<Utc>>>>(),
                &outcomes.iter().map(|o| o.attempt.is_some() as i32).collect::<Vec<i32>>(),
                &outcomes.iter().map(|o| o.lease).collect::<Vec<i64>>(),
                &lo,
                &hi,
                &outcomes.iter().map(may_notice).collect::<Vec<bool>>(),
            ],
        )
        .await?;
    let applied: i64 = row.get(0);
    // Notices only of the outcomes this claim still owned: a stale one's verdict,
    // and so its notice, is the new owner's to give.
    let noticed: std::collections::HashSet<String> =
        row.get::<_, Option<Vec<String>>>(1).unwrap_or_default().into_iter().collect();
    let owned: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| may_notice(o) && noticed.contains(&format!("{} {}", o.msg_id, o.endpoint_id)))
        .collect();
    let mut notices = Vec::new();

    // Endpoint health, one row per endpoint: any success in the batch clears the
    // streak; any 410 disables.
    let mut health: HashMap<(String, String, String), (bool, bool)> = HashMap::new();
    for o in attempted {
        let e = health
            .entry((o.tenant_id.to_string(), o.app_id.to_string(), o.endpoint_id.to_string()))
            .or_insert((false, false));
        e.0 |= o.attempt.as_ref().is_some_and(|a| a.success);
        e.1 |= o.disable_endpoint;
    }
    let mut disabled = 0;
    let mut newly_disabled = Vec::new();
    if !health.is_empty() {
        let keys: Vec<_> = health.iter().collect();
        let statement = tx
            .prepare_cached(
                "UPDATE endpoints e SET
                    failing_since = CASE WHEN u.ok THEN NULL ELSE COALESCE(e.failing_since, now()) END,
                    disabled = e.disabled OR u.gone
                        OR (NOT u.ok AND COALESCE(e.failing_since, now()) < now() - make_interval(secs => $6))
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::bool[])
                    AS u(tenant_id, app_id, id, ok, gone)
                 WHERE e.tenant_id = u.tenant_id AND e.app_id = u.app_id AND e.id = u.id
                 RETURNING e.disabled, (SELECT disabled FROM endpoints o
                    WHERE o.tenant_id = e.tenant_id AND o.app_id = e.app_id AND o.id = e.id),
                    e.tenant_id, e.app_id, e.id, e.failing_since",
            )
            .await?;
        let rows = tx
            .query(
                &statement,
                &[
                    &keys.iter().map(|(k, _)| k.0.clone()).collect::<Vec<_>>(),
                    &keys.iter().map(|(k, _)| k.1.clone()).collect::<Vec<_>>(),
                    &keys.iter().map(|(k, _)| k.2.clone()).collect::<Vec<_>>(),
                    &keys.iter().map(|(_, v)| v.0).collect::<Vec<_>>(),
                    &keys.iter().map(|(_, v)| v.1).collect::<Vec<_>>(),
                    &disable_after.as_secs_f64(),
                ],
            )
            .await?;
        // The sub-select sees the row as it was before this statement.
        for r in rows.iter().filter(|r| r.get::<_, bool>(0) && !r.get::<_, bool>(1)) {
            disabled += 1;
            let (tenant, app, ep) =
                (TenantId::from_db(r.get(2)), AppId::from_db(r.get(3)), EndpointId::from_db(r.get(4)));
            let mut n = Notice::endpoint(&tenant, "endpoint.disabled", &app, &ep);
            n.fail_since = r.get(5);
            n.trigger = Some("automatic");
            newly_disabled.push(n);
        }
    }
    // A failed attempt that disabled its endpoint was its delivery's last: its
    // retries are exhausted too (the rest would go unsent).
    for o in owned {
        let gone =
            newly_disabled.iter().any(|n| n.endpoint_id.as_ref() == Some(&o.endpoint_id) && n.app_id == o.app_id);
        let kind = match o.notice {
            Some(AttemptNotice::Recovered) => AttemptNotice::Recovered,
            _ if gone => AttemptNotice::Exhausted,
            Some(kind) => kind,
            None => continue,
        };
        let mut n = Notice::endpoint(&o.tenant_id, kind.event_type(), &o.app_id, &o.endpoint_id);
        n.msg_id = Some(o.msg_id.clone());
        n.attempt = o.attempt.as_ref().map(|a| (a.id.clone(), a.status_code));
        notices.push(n);
    }
    notices.extend(newly_disabled);
    let operational = operational::emit(&*tx, &notices).await?;
    tx.commit().await?;
    Ok(Recorded { disabled, stale: outcomes.len() as u64 - applied as u64, operational })
}

/// Whether an outcome may tell the operational webhooks something: it has a
/// notice, or it is a scheduled attempt that failed (its endpoint may be disabled
/// by it, which makes it the delivery's last).
fn may_notice(o: &Outcome) -> bool {
    o.notice.is_some() || (o.trigger != Trigger::Manual && o.attempt.as_ref().is_some_and(|a| !a.success))
}

/// Makes a re-enabled tenant's paused deliveries due now; returns how many.
pub async fn resume_tenant(db: &impl GenericClient, tenant: &TenantId) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "UPDATE deliveries SET next_attempt_at = now()
             WHERE tenant_id = $1 AND status = 1 AND next_attempt_at IS NULL",
            &[&tenant.as_str()],
        )
        .await?)
}

/// Makes paused deliveries of tenants enabled again lately due now, at most
/// `limit` per call; returns how many. `resume_tenant` does this at once when the
/// operator re-enables a tenant, but a claim that read the tenant as disabled just
/// before (a statement of at most a few seconds) can pause rows after it ran:
/// this sweep, run periodically, catches those. It looks only at tenants changed
/// in the last two minutes, so the paused rows of tenants still disabled (or
/// deleted) cost it nothing.
pub async fn resume_enabled(db: &impl GenericClient, limit: i64) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "UPDATE deliveries d SET next_attempt_at = now()
             FROM (SELECT d.tenant_id, d.app_id, d.msg_id, d.endpoint_id
                   FROM tenants t JOIN deliveries d ON d.tenant_id = t.id
                   WHERE NOT t.disabled AND t.deleted_at IS NULL AND t.updated_at > now() - interval '2 minutes'
                     AND d.status = 1 AND d.next_attempt_at IS NULL
                   LIMIT $1 FOR UPDATE OF d SKIP LOCKED) r
             WHERE d.tenant_id = r.tenant_id AND d.app_id = r.app_id AND d.msg_id = r.msg_id
               AND d.endpoint_id = r.endpoint_id AND d.status = 1 AND d.next_attempt_at IS NULL",
            &[&limit],
        )
        .await?)
}

/// Marks a claimed delivery failed without an attempt row: the last resort for a
/// result that cannot be recorded, so that it is neither lost from sight nor sent
/// again and again. It stays listable and can be resent. Returns whether it existed.
pub async fn quarantine(db: &impl GenericClient, o: &Outcome) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE deliveries SET status = 2, next_attempt_at = NULL, last_attempt_at = now(), trigger = 0,
                lease_token = NULL
             WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND endpoint_id = $4 AND lease_token = $5",
            &[&o.tenant_id.as_str(), &o.app_id.as_str(), &o.msg_id.as_str(), &o.endpoint_id.as_str(), &o.lease],
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
    // delivery outlives its message (no foreign key says so any more).
    let n = db
        .execute(
            "INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, status, next_attempt_at, trigger)
         SELECT $1, $2, $3, $4, 1, now(), 1 FROM messages
         WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR KEY SHARE
         ON CONFLICT (tenant_id, app_id, msg_id, endpoint_id) DO UPDATE
            SET status = 1, next_attempt_at = now(), lease_token = NULL,
                trigger = CASE WHEN deliveries.status IN (1, 3) THEN deliveries.trigger ELSE 1 END",
            &[&tenant.as_str(), &app.as_str(), &msg.as_str(), &endpoint.as_str()],
        )
        .await?;
    Ok(n == 1)
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
    let n = db
        .execute(
            "UPDATE deliveries SET status = 1, next_attempt_at = now(), lease_token = NULL,
                trigger = CASE WHEN status IN (1, 3) THEN trigger ELSE 1 END
             WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3
               AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = $3
                   AND m.payload IS NOT NULL)",
            &[&tenant.as_str(), &app.as_str(), &msg.as_str()],
        )
        .await?;
    Ok(n)
}

/// Re-schedules the endpoint's failed deliveries created in `[since, until)` for a
/// fresh schedule run. Returns how many.
pub async fn recover(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    since: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "UPDATE deliveries SET status = 1, attempts = 0, next_attempt_at = now(), trigger = 0, lease_token = NULL
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND status = 2
               AND created_at >= $4 AND ($5::timestamptz IS NULL OR created_at < $5)
               AND EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = deliveries.tenant_id
                   AND m.app_id = deliveries.app_id AND m.id = deliveries.msg_id AND m.payload IS NOT NULL)",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until],
        )
        .await?;
    Ok(n)
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
            "SELECT status, count(*) FROM deliveries
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
               AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
             GROUP BY status",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until],
        )
        .await?;
    Ok(rows.iter().map(|r| (DeliveryStatus::from_db(r.get(0)), r.get(1))).collect())
}
