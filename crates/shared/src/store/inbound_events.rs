//! The `inbound_events` table: what each source admitted, once per key.
//!
//! Admission is one `INSERT … ON CONFLICT DO NOTHING` against the key in
//! `inbound_keys`: of any number of concurrent copies, on any number of
//! instances, exactly one inserts, and only that one writes its event row.
//! (`inbound_events` is partitioned by time, and a unique index cannot span
//! partitions; the narrow key table holds the decision for the whole window.)
//! Every call by key finds the event through its key row.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::usage::{self, Counter};
use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    ids::{AppId, InboundEventId, MessageId, SourceId, TenantId},
    status::InboundStatus,
};

#[derive(Debug, Clone)]
pub struct InboundEvent {
    pub id: InboundEventId,
    pub key: String,
    pub status: InboundStatus,
    pub app_id: AppId,
    pub msg_id: Option<MessageId>,
    pub event_type: String,
    pub content_type: String,
    /// `None` once its message's content was expunged.
    pub payload: Option<Vec<u8>>,
    pub duplicates: i32,
    pub received_at: DateTime<Utc>,
}

/// An event to admit.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub id: InboundEventId,
    pub key: String,
    /// The key's plain form, while events admitted before keys were keyed may
    /// remain (see `inbound_keys.rs`): a key stored in it is this event's too.
    pub plain_key: Option<String>,
    pub app_id: AppId,
    pub msg_id: Option<MessageId>,
    pub event_type: String,
    pub content_type: String,
    pub payload: Vec<u8>,
}

/// What an earlier copy left, for a request that lost the insert.
#[derive(Debug, Clone)]
pub struct Existing {
    pub id: InboundEventId,
    /// The key it is stored under: the keyed form, or for an event admitted
    /// before keys were keyed, the plain one.
    pub key: String,
    pub status: InboundStatus,
    /// A `processing` row whose lease ran out: its holder is presumed dead.
    pub lease_expired: bool,
    /// Seconds since its key was first received (on Postgres's clock): what is
    /// left of the dedupe window is the window less this.
    pub age_secs: i64,
}

/// The columns of an event, read from `inbound_events` named as such (no alias).
/// An event forwarded as a message keeps no copy of its body: the message holds
/// it (`inbound_batch`), and it is read from there, for as long as the message
/// keeps it.
pub(super) const COLUMNS: &str = "id, key, status, app_id, msg_id, event_type, content_type,
    COALESCE(payload, (SELECT m.payload FROM messages m WHERE m.tenant_id = inbound_events.tenant_id
        AND m.app_id = inbound_events.app_id AND m.id = inbound_events.msg_id)) AS payload, duplicates, received_at";

/// The event of a row holding [`COLUMNS`] (read by name: other columns may come with them).
pub(super) fn from_row(r: &Row) -> InboundEvent {
    let msg: Option<String> = r.get("msg_id");
    InboundEvent {
        id: InboundEventId::from_db(r.get("id")),
        key: r.get("key"),
        status: InboundStatus::from_db(r.get("status")),
        app_id: AppId::from_db(r.get("app_id")),
        msg_id: msg.map(MessageId::from_db),
        event_type: r.get("event_type"),
        content_type: r.get("content_type"),
        payload: r.get("payload"),
        duplicates: r.get("duplicates"),
        received_at: r.get("received_at"),
    }
}

/// A `processing` row's lease: how long, and the fencing token of its holder.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    pub length: Duration,
    pub token: i64,
}

/// The usage CTE of a statement that admits inbound events (`from` returns
/// `tenant_id` and `payload`).
pub(super) fn accepted_usage(from: &str) -> String {
    usage::bump(
        "usage",
        from,
        &[(Counter::InboundAccepted, "count(*)"), (Counter::BytesIn, "sum(octet_length(payload))")],
    )
}

/// Since when inbound keys are stored keyed (`None`: never stored plain).
pub async fn keyed_at(db: &impl GenericClient) -> Result<Option<DateTime<Utc>>, StoreError> {
    Ok(db.query_one("SELECT keyed_at FROM inbound_key_form", &[]).await?.get(0))
}

/// The dedupe decision: inserts the event with `status` unless its key exists
/// (in either form). `lease` is set for `processing` rows. Returns whether this
/// call inserted it.
pub async fn admit(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    e: &NewInbound,
    status: InboundStatus,
    lease: Option<Lease>,
) -> Result<bool, StoreError> {
    let lease_secs = lease.map(|l| l.length.as_secs_f64());
    let token = lease.map(|l| l.token);
    let sql = format!(
        "WITH input AS (SELECT $2::text AS s, $6::text AS a), {}, {}, won AS (
            INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, keyed)
            SELECT $1, $2, $3, $4, true
            -- Keys are only ever written keyed now (every plain key was written
            -- before the switch): a plain one found here is committed and stays.
            -- Nothing under a source or application deleted meanwhile (`store::parents`).
            WHERE EXISTS (SELECT 1 FROM locked_apps) AND EXISTS (SELECT 1 FROM locked_sources)
              AND NOT EXISTS (SELECT 1 FROM inbound_keys o WHERE o.tenant_id = $1 AND o.source_id = $2 AND o.key = $13)
            ON CONFLICT (tenant_id, source_id, key) DO NOTHING
            RETURNING event_id
         ), ins AS (
            INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, msg_id, event_type,
                content_type, payload, lease_until, lease_token)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(secs => $11), $12 FROM won
            RETURNING tenant_id, status, payload
         ), {}
         SELECT count(*) FROM ins",
        super::parents::lock_apps("$1", "input", "a"),
        super::parents::lock_sources("$1", "input", "s"),
        // A `processing` row is counted when it completes.
        accepted_usage("ins WHERE status = 'accepted'")
    );
    let n: i64 = db
        .query_one(
            &sql,
            &[
                &tenant.as_str(),
                &source.as_str(),
                &e.key,
                &e.id.as_str(),
                &status.as_str(),
                &e.app_id.as_str(),
                &e.msg_id.as_ref().map(|m| m.as_str()),
                &e.event_type,
                &e.content_type,
                &e.payload,
                &lease_secs,
                &token,
                &e.plain_key,
            ],
        )
        .await?
        .get(0);
    Ok(n == 1)
}

/// Counts a duplicate and reports what the first copy left, found by its key in
/// either form; `None` if the row was released (a failed sync attempt) since the
/// insert lost. Calls that follow go by the key it is stored under (`Existing::key`).
pub async fn duplicate(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    key: &str,
    plain: Option<&str>,
) -> Result<Option<Existing>, StoreError> {
    let sql = format!(
        "WITH dup AS (
            UPDATE inbound_events e SET duplicates = e.duplicates + 1
            FROM inbound_keys k
            WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = ANY(ARRAY[$3, $4])
              AND e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
            RETURNING e.tenant_id, e.id, e.status, COALESCE(e.lease_until < now(), false) AS expired,
                GREATEST(EXTRACT(EPOCH FROM now() - k.received_at), 0)::bigint AS age, k.key
         ), {}
         SELECT id, status, expired, age, key FROM dup",
        usage::bump("usage", "dup", &[(Counter::InboundDuplicates, "count(*)")])
    );
    let row = db.query_opt(&sql, &[&tenant.as_str(), &source.as_str(), &key, &plain]).await?;
    Ok(row.map(|r| Existing {
        id: InboundEventId::from_db(r.get("id")),
        key: r.get("key"),
        status: InboundStatus::from_db(r.get("status")),
        lease_expired: r.get("expired"),
        age_secs: r.get("age"),
    }))
}

/// Takes over a `processing` row whose lease ran out, under the new lease's token;
/// true if this call got it.
pub async fn take_over(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    key: &str,
    lease: Lease,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE inbound_events e SET lease_until = now() + make_interval(secs => $4), lease_token = $5
             FROM inbound_keys k
             WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = $3
               AND e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
               AND e.status = 'processing' AND e.lease_until < now()",
            &[&tenant.as_str(), &source.as_str(), &key, &lease.length.as_secs_f64(), &lease.token],
        )
        .await?;
    Ok(n == 1)
}

/// Marks a forwarded event completed, if `token` still holds its lease: false
/// when another request took it over (then that one answers for it).
pub async fn complete(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    key: &str,
    token: i64,
) -> Result<bool, StoreError> {
    let sql = format!(
        "WITH done AS (
            UPDATE inbound_events e SET status = 'completed', lease_until = NULL, lease_token = NULL
            FROM inbound_keys k
            WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = $3
              AND e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
              AND e.status = 'processing' AND e.lease_token = $4
            RETURNING e.tenant_id, e.payload
         ), {}
         SELECT count(*) FROM done",
        accepted_usage("done")
    );
    let n: i64 = db.query_one(&sql, &[&tenant.as_str(), &source.as_str(), &key, &token]).await?.get(0);
    Ok(n == 1)
}

/// Releases a `processing` row after a failed forward, so the provider's retry
/// runs again: the event and its key go together, only while `token` holds its
/// lease (a successor's row stays).
pub async fn release(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    key: &str,
    token: i64,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "WITH gone AS (
                DELETE FROM inbound_events e USING inbound_keys k
                WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = $3
                  AND e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
                  AND e.status = 'processing' AND e.lease_token = $4
                RETURNING e.id
             )
             DELETE FROM inbound_keys k USING gone
             WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = $3 AND k.event_id = gone.id",
            &[&tenant.as_str(), &source.as_str(), &key, &token],
        )
        .await?;
    Ok(n == 1)
}

pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    page: &PageRequest,
) -> Result<Page<InboundEvent>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!(
        "SELECT {COLUMNS} FROM inbound_events WHERE tenant_id = $1 AND source_id = $2
           AND ($3::text IS NULL OR id {cmp} $3) ORDER BY id {dir} LIMIT $4"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &source.as_str(), &key, &page.fetch_limit()]).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |e| e.id.to_string()))
}

pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    id: &InboundEventId,
) -> Result<Option<InboundEvent>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM inbound_events WHERE tenant_id = $1 AND source_id = $2 AND id = $3");
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &source.as_str(), &id.as_str()]).await?.as_ref().map(from_row))
}
