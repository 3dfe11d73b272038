//! The `messages` table and the transactional outbox: a message and its deliveries
//! commit together, so no message exists that is never dispatched.

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::fanout;
use super::usage::{self, Counter};
use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{AppId, MessageId, Ref, TenantId};

#[derive(Debug, Clone)]
pub struct Message {
    pub id: MessageId,
    pub event_id: Option<String>,
    pub event_type: String,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    /// `None` once expired (`payloadRetentionPeriod`) or expunged.
    pub payload: Option<Vec<u8>>,
    pub content_type: String,
    pub created_at: DateTime<Utc>,
}

/// A message to publish.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub id: MessageId,
    pub event_id: Option<String>,
    pub event_type: String,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub payload: Vec<u8>,
    pub content_type: String,
    /// Sent as `Idempotency-Key`; `None` sends the message id.
    pub idempotency_key: Option<String>,
    /// The `Idempotency-Key` of the API request that creates it, unique per
    /// application (a retried request finds its message: [`by_request_key`]).
    pub request_key: Option<String>,
    /// The creating request's W3C trace context, kept for the delivery spans.
    pub traceparent: Option<String>,
    /// When the payload is dropped (`payloadRetentionPeriod`); `None` keeps it as
    /// long as the message.
    pub payload_expires_at: Option<DateTime<Utc>>,
}

/// Filters of message lists.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    pub channel: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub before: Option<DateTime<Utc>>,
    pub after: Option<DateTime<Utc>>,
    /// Only messages carrying this tag (Svix's search `tag`).
    pub tag: Option<String>,
    /// Only messages with a delivery in one of these states (codes of
    /// [`crate::status::DeliveryStatus`]): Hookgate's own filter, for the portal's log.
    pub delivery_status: Option<Vec<i16>>,
}

pub(super) const COLUMNS: &str = "id, event_id, event_type, channels, tags, payload, content_type, created_at";

/// A message from a row carrying [`COLUMNS`] by their names (among others).
pub(super) fn from_row(r: &Row) -> Message {
    Message {
        id: MessageId::from_db(r.get("id")),
        event_id: r.get("event_id"),
        event_type: r.get("event_type"),
        channels: r.get("channels"),
        tags: r.get("tags"),
        payload: r.get("payload"),
        content_type: r.get("content_type"),
        created_at: r.get("created_at"),
    }
}

/// The usage CTE of a statement that creates API messages (`from` returns
/// `tenant_id` and `payload`).
pub(super) fn created_usage(from: &str) -> String {
    usage::bump(
        "usage",
        from,
        &[(Counter::MessagesCreated, "count(*)"), (Counter::BytesIn, "sum(octet_length(payload))")],
    )
}

/// Publishing: finds the application by id or uid and inserts the message and one
/// due delivery per matching, enabled endpoint, in one statement (one round trip;
/// alone, one implicit transaction). `None` if the tenant has no such application.
/// The caller wakes the workers after the commit.
pub async fn publish(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &Ref<AppId>,
    m: &NewMessage,
) -> Result<Option<(Message, u64)>, StoreError> {
    let cols = COLUMNS.split(',').map(|c| format!("msg.{}", c.trim())).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "WITH app AS (
            -- Locked as a foreign key's check would (`store::parents`): its
            -- erasure waits for this statement.
            SELECT id FROM applications WHERE tenant_id = $1 AND (id = $2 OR uid = $2) AND NOT operational
            ORDER BY (id = $2) DESC LIMIT 1 FOR KEY SHARE
         ), event_id AS (
            -- The eventId's and the request key's uniqueness: a repeat fails the
            -- whole statement (a unique violation names which), nothing is written.
            INSERT INTO message_event_ids (tenant_id, app_id, event_id, msg_id)
            SELECT $1, app.id, $4, $3 FROM app WHERE $4::text IS NOT NULL
         ), request_key AS (
            INSERT INTO message_request_keys (tenant_id, app_id, key, msg_id)
            SELECT $1, app.id, $11, $3 FROM app WHERE $11::text IS NOT NULL
         ), msg AS (
            INSERT INTO messages (tenant_id, app_id, id, event_id, event_type, channels, tags, payload, content_type,
                idempotency_key, traceparent, payload_expires_at)
            SELECT $1, app.id, $3, $4, $5, $6, $7, $8, $9, $10, $12, $13 FROM app
            RETURNING {COLUMNS}, tenant_id, app_id
         ), {}, {}
         SELECT {cols}, (SELECT count(*) FROM dels) AS fanned FROM msg",
        fanout::insert_deliveries("msg"),
        created_usage("msg"),
    );
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &m.id.as_str(),
                &m.event_id,
                &m.event_type,
                &m.channels,
                &m.tags,
                &m.payload,
                &m.content_type,
                &m.idempotency_key,
                &m.request_key,
                &m.traceparent,
                &m.payload_expires_at,
            ],
        )
        .await?;
    Ok(row.map(|r| {
        let fanned: i64 = r.get("fanned");
        (from_row(&r), fanned as u64)
    }))
}

/// A message for one endpoint only (the portal's test event, Svix's
/// `send-example`): the message and its one due delivery in one statement, past
/// the fan-out rule. `None` if the tenant has no such endpoint in the application,
/// or it is disabled (it would never be sent the message).
pub async fn publish_to_endpoint(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &crate::ids::EndpointId,
    m: &NewMessage,
) -> Result<Option<Message>, StoreError> {
    let sql = format!(
        "WITH input AS (SELECT $2::text AS a), {}, ep AS (
            SELECT e.tenant_id, e.app_id, e.id FROM endpoints e JOIN locked_apps la ON la.id = e.app_id
            WHERE e.tenant_id = $1 AND e.app_id = $2 AND e.id = $3 AND NOT e.disabled
         ), msg AS (
            INSERT INTO messages (tenant_id, app_id, id, event_type, payload, content_type, traceparent, tags)
            SELECT $1, $2, $4, $5, $6, $7, $8, $9 FROM ep
            RETURNING {COLUMNS}, tenant_id
         ), del AS (
            INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, next_attempt_at)
            SELECT ep.tenant_id, ep.app_id, msg.id, ep.id, now() FROM ep, msg
            RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
         ), {}, {}
         SELECT {COLUMNS} FROM msg",
        super::parents::lock_apps("$1", "input", "a"),
        super::wakes::lower("del"),
        created_usage("msg"),
    );
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &endpoint.as_str(),
                &m.id.as_str(),
                &m.event_type,
                &m.payload,
                &m.content_type,
                &m.traceparent,
                &m.tags,
            ],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// The message an API request with this `Idempotency-Key` created within `ttl`,
/// if any. A key older than that (the key's own lifetime) is let go first, so
/// that it may create a message again, as an expired `Idempotency-Key` may.
pub async fn by_request_key(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &Ref<AppId>,
    key: &str,
    ttl: std::time::Duration,
) -> Result<Option<Message>, StoreError> {
    db.execute(
        "DELETE FROM message_request_keys r USING applications a
         WHERE r.tenant_id = $1 AND a.tenant_id = r.tenant_id AND a.id = r.app_id AND (a.id = $2 OR a.uid = $2)
           AND r.key = $3 AND r.created_at < now() - make_interval(secs => $4)",
        &[&tenant.as_str(), &app.as_str(), &key, &ttl.as_secs_f64()],
    )
    .await?;
    let cols = COLUMNS.split(',').map(|c| format!("m.{}", c.trim())).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT {cols} FROM message_request_keys r
         JOIN applications a ON a.tenant_id = r.tenant_id AND a.id = r.app_id
         JOIN messages m ON m.tenant_id = r.tenant_id AND m.app_id = r.app_id AND m.id = r.msg_id
         WHERE r.tenant_id = $1 AND (a.id = $2 OR a.uid = $2) AND r.key = $3
         ORDER BY (a.id = $2) DESC LIMIT 1"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &key]).await?.as_ref().map(from_row))
}

/// Whether a message of the application (by id or uid) already carries this
/// `eventId`, registered or not: an ingress message's eventId is its inbound
/// event's id, unique by construction and so kept out of `message_event_ids`.
/// Asked before an API message takes an eventId shaped like one (`evt_…`);
/// such an id cannot be known before it is committed, so asking first races
/// with nothing.
pub async fn event_id_in_use(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &Ref<AppId>,
    event_id: &str,
) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM messages m JOIN applications a ON a.tenant_id = m.tenant_id AND a.id = m.app_id
                            WHERE m.tenant_id = $1 AND (a.id = $2 OR a.uid = $2) AND m.event_id = $3)",
            &[&tenant.as_str(), &app.as_str(), &event_id],
        )
        .await?;
    Ok(row.get(0))
}

/// A message by id or by its `eventId`.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &Ref<MessageId>,
) -> Result<Option<Message>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM messages WHERE tenant_id = $1 AND app_id = $2 AND (id = $3 OR event_id = $3)
         ORDER BY (id = $3) DESC LIMIT 1"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &msg.as_str()]).await?.as_ref().map(from_row))
}

/// Newest first, as Svix lists messages.
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    page: &PageRequest,
    f: &MessageFilter,
) -> Result<Page<Message>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!(
        "SELECT {COLUMNS} FROM messages WHERE tenant_id = $1 AND app_id = $2
           AND ($3::text IS NULL OR id {cmp} $3)
           AND ($4::text IS NULL OR $4 = ANY (channels))
           AND ($5::text[] IS NULL OR event_type = ANY ($5))
           AND ($6::timestamptz IS NULL OR created_at < $6)
           AND ($7::timestamptz IS NULL OR created_at > $7)
           AND ($9::text IS NULL OR $9 = ANY (tags))
           AND ($10::smallint[] IS NULL OR EXISTS (SELECT 1 FROM deliveries d
                 WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.msg_id = messages.id AND d.status = ANY ($10)))
         ORDER BY id {dir} LIMIT $8"
    );
    let rows = db
        .query(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &key,
                &f.channel,
                &f.event_types,
                &f.before,
                &f.after,
                &page.fetch_limit(),
                &f.tag,
                &f.delivery_status,
            ],
        )
        .await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |m| m.id.to_string()))
}
