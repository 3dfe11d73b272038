//! The `attempts` table: one row per HTTP attempt, newest first in every list.

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    ids::{AppId, AttemptId, EndpointId, MessageId, TenantId},
    status::{DeliveryStatus, Trigger},
};

#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: AttemptId,
    pub msg_id: MessageId,
    pub endpoint_id: EndpointId,
    pub url: String,
    pub status: DeliveryStatus,
    pub trigger_type: Trigger,
    pub response_status_code: i16,
    pub response: String,
    pub response_duration_ms: i64,
    pub created_at: DateTime<Utc>,
    /// The headers the request went with (`None` for attempts made before they
    /// were kept); custom headers named as sensitive read redacted.
    pub request_headers: Option<serde_json::Value>,
}

/// Filters of attempt lists.
#[derive(Debug, Clone, Default)]
pub struct AttemptFilter {
    pub status: Option<DeliveryStatus>,
    /// 0 (no response), 100, 200, 300, 400 or 500.
    pub status_code_class: Option<i16>,
    pub endpoint_id: Option<String>,
    pub before: Option<DateTime<Utc>>,
    pub after: Option<DateTime<Utc>>,
    /// Only attempts of messages in this channel, with this tag, of these types.
    pub channel: Option<String>,
    pub tag: Option<String>,
    pub event_types: Option<Vec<String>>,
}

const COLUMNS: &str = "id, msg_id, endpoint_id, url, status, trigger_type, response_status_code, response,
    response_duration_ms, created_at, request_headers";

fn from_row(r: &Row) -> Attempt {
    Attempt {
        id: AttemptId::from_db(r.get("id")),
        msg_id: MessageId::from_db(r.get("msg_id")),
        endpoint_id: EndpointId::from_db(r.get("endpoint_id")),
        url: r.get("url"),
        status: DeliveryStatus::from_db(r.get("status")),
        trigger_type: Trigger::from_db(r.get("trigger_type")),
        response_status_code: r.get("response_status_code"),
        response: r.get("response"),
        response_duration_ms: r.get("response_duration_ms"),
        created_at: r.get("created_at"),
        request_headers: r
            .get::<_, Option<serde_json::Value>>("request_headers")
            .map(|h| super::attempt_headers::read(h, r.get::<_, &str>("msg_id"))),
    }
}

/// Which column a list is scoped by besides the application.
pub enum Scope<'a> {
    Message(&'a MessageId),
    Endpoint(&'a EndpointId),
}

pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    scope: Scope<'_>,
    page: &PageRequest,
    f: &AttemptFilter,
) -> Result<Page<Attempt>, StoreError> {
    let (column, value) = match scope {
        Scope::Message(m) => ("msg_id", m.as_str()),
        Scope::Endpoint(e) => ("endpoint_id", e.as_str()),
    };
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!("SELECT {COLUMNS} FROM attempts WHERE {} ORDER BY id {dir} LIMIT $10", filtered(column, cmp));
    let status = f.status.map(DeliveryStatus::code);
    let bound = Bound { tenant: tenant.as_str(), app: app.as_str(), value, key, status, f, limit: page.fetch_limit() };
    let rows = db.query(&sql, &bound.params()).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |a| a.id.to_string()))
}

/// How many of an endpoint's attempts a filter takes, counted up to `most`
/// (Svix's `count`: past it, `approximated`); `true` when there are more.
pub async fn count(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    f: &AttemptFilter,
    most: i64,
) -> Result<(i64, bool), StoreError> {
    let sql =
        format!("SELECT count(*) FROM (SELECT 1 FROM attempts WHERE {} LIMIT $10) c", filtered("endpoint_id", ">"));
    let status = f.status.map(DeliveryStatus::code);
    let bound = Bound {
        tenant: tenant.as_str(),
        app: app.as_str(),
        value: endpoint.as_str(),
        key: None,
        status,
        f,
        limit: most + 1,
    };
    let row = db.query_one(&sql, &bound.params()).await?;
    let n: i64 = row.get(0);
    Ok((n.min(most), n > most))
}

/// The conditions of an attempt list, over the parameters [`Bound`] binds:
/// the application, `column` = $3, after the cursor $4 by `cmp`, and the filter.
fn filtered(column: &str, cmp: &str) -> String {
    format!(
        "tenant_id = $1 AND app_id = $2 AND {column} = $3
           AND ($4::text IS NULL OR id {cmp} $4)
           AND ($5::smallint IS NULL OR status = $5)
           AND ($6::smallint IS NULL OR (response_status_code >= $6 AND response_status_code < $6 + 100
                OR ($6 = 0 AND response_status_code = 0)))
           AND ($7::text IS NULL OR endpoint_id = $7)
           AND ($8::timestamptz IS NULL OR created_at < $8)
           AND ($9::timestamptz IS NULL OR created_at > $9)
           AND ($11::text IS NULL AND $12::text IS NULL AND $13::text[] IS NULL OR EXISTS (
                SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.app_id = $2 AND m.id = attempts.msg_id
                   AND ($11::text IS NULL OR $11 = ANY (m.channels))
                   AND ($12::text IS NULL OR $12 = ANY (m.tags))
                   AND ($13::text[] IS NULL OR m.event_type = ANY ($13))))"
    )
}

/// The values bound to $1 to $13 of [`filtered`], $10 being the row limit.
struct Bound<'a> {
    tenant: &'a str,
    app: &'a str,
    value: &'a str,
    key: Option<&'a str>,
    status: Option<i16>,
    f: &'a AttemptFilter,
    limit: i64,
}

impl Bound<'_> {
    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 13] {
        let f = self.f;
        [
            &self.tenant,
            &self.app,
            &self.value,
            &self.key,
            &self.status,
            &f.status_code_class,
            &f.endpoint_id,
            &f.before,
            &f.after,
            &self.limit,
            &f.channel,
            &f.tag,
            &f.event_types,
        ]
    }
}

pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
    id: &AttemptId,
) -> Result<Option<Attempt>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM attempts WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND id = $4");
    Ok(db
        .query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &msg.as_str(), &id.as_str()])
        .await?
        .as_ref()
        .map(from_row))
}

/// One of an endpoint's attempts, by id.
pub async fn get_for_endpoint(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    id: &AttemptId,
) -> Result<Option<Attempt>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM attempts WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND id = $4");
    Ok(db
        .query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &id.as_str()])
        .await?
        .as_ref()
        .map(from_row))
}

/// One hour of an endpoint's attempts: how many succeeded and failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourCount {
    pub hour: DateTime<Utc>,
    pub success: i64,
    pub fail: i64,
}

/// The endpoint's attempts per hour in `[since, until)`, oldest first, hours
/// without attempts left out. Attempt ids are made at attempt time, so the id
/// range bounds the index scan in every partition.
pub async fn hourly(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<HourCount>, StoreError> {
    let rows = db
        .query(
            "SELECT date_trunc('hour', created_at) AS hour,
                    count(*) FILTER (WHERE status = $6) AS success, count(*) FILTER (WHERE status <> $6) AS fail
             FROM attempts
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
               AND id >= hookgate_id_floor('atmpt', $4) AND id < hookgate_id_floor('atmpt', $5)
               AND created_at >= $4 AND created_at < $5
             GROUP BY 1 ORDER BY 1",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until, &DeliveryStatus::Success.code()],
        )
        .await?;
    Ok(rows.iter().map(|r| HourCount { hour: r.get("hour"), success: r.get("success"), fail: r.get("fail") }).collect())
}

/// The endpoint's deliveries of messages made in `[since, until)` that ended
/// canceled (a transformation said not to send): they have no attempt.
pub async fn canceled(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<i64, StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) FROM deliveries
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND status = $6
               AND msg_id >= hookgate_id_floor('msg', $4) AND msg_id < hookgate_id_floor('msg', $5)",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until, &DeliveryStatus::Canceled.code()],
        )
        .await?;
    Ok(row.get(0))
}

/// A FIFO endpoint's messages by what their attempts say (its batches make
/// attempts, one per message, and no deliveries): how many had an attempt that
/// succeeded, and how many only attempts that failed, of attempts made in
/// `[since, until)` (either end open).
pub async fn per_message(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
) -> Result<(i64, i64), StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) FILTER (WHERE ok) AS succeeded, count(*) FILTER (WHERE NOT ok) AS failed FROM (
                SELECT bool_or(status = $6) AS ok FROM attempts
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
                  AND ($4::timestamptz IS NULL OR (id >= hookgate_id_floor('atmpt', $4) AND created_at >= $4))
                  AND ($5::timestamptz IS NULL OR (id < hookgate_id_floor('atmpt', $5) AND created_at < $5))
                GROUP BY msg_id) m",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &since, &until, &DeliveryStatus::Success.code()],
        )
        .await?;
    Ok((row.get("succeeded"), row.get("failed")))
}
