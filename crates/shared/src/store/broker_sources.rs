//! Broker sources (`broker_sources`): queues and streams a tenant's messages are
//! consumed from, each held by one worker process at a time under a lease, and
//! the broker messages set aside as dead letters (`broker_dead_letters`).

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{AppId, BrokerSourceId, TenantId};

/// A broker source as stored (its configuration still sealed).
#[derive(Debug, Clone)]
pub struct BrokerSource {
    pub tenant_id: TenantId,
    pub id: BrokerSourceId,
    pub name: String,
    pub kind: String,
    pub app_id: Option<AppId>,
    pub config_sealed: Vec<u8>,
    pub disabled: bool,
    pub last_read_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str =
    "tenant_id, id, name, kind, app_id, config_sealed, disabled, last_read_at, last_error, created_at, updated_at";

fn from_row(r: &Row) -> BrokerSource {
    BrokerSource {
        tenant_id: TenantId::from_db(r.get("tenant_id")),
        id: BrokerSourceId::from_db(r.get("id")),
        name: r.get("name"),
        kind: r.get("kind"),
        app_id: r.get::<_, Option<String>>("app_id").map(AppId::from_db),
        config_sealed: r.get("config_sealed"),
        disabled: r.get("disabled"),
        last_read_at: r.get("last_read_at"),
        last_error: r.get("last_error"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

/// What a create or replace writes.
#[derive(Debug, Clone)]
pub struct Fields {
    pub name: String,
    pub kind: String,
    pub app_id: Option<AppId>,
    pub config_sealed: Vec<u8>,
    pub disabled: bool,
}

/// The purpose a source's configuration is sealed under.
pub fn purpose(id: &BrokerSourceId) -> String {
    format!("broker-source:{id}")
}

/// Inserts a source unless the tenant has `most` already (`None`), in the
/// caller's transaction: the tenant's row is locked first, so two creations
/// cannot both pass the count.
pub async fn insert_capped(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &BrokerSourceId,
    f: &Fields,
    most: i64,
) -> Result<Option<BrokerSource>, StoreError> {
    db.execute("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE", &[&tenant.as_str()]).await?;
    if count(db, tenant).await? >= most {
        return Ok(None);
    }
    insert(db, tenant, id, f).await.map(Some)
}

async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &BrokerSourceId,
    f: &Fields,
) -> Result<BrokerSource, StoreError> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO broker_sources (tenant_id, id, name, kind, app_id, config_sealed, disabled)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
            ),
            &[
                &tenant.as_str(),
                &id.as_str(),
                &f.name,
                &f.kind,
                &f.app_id.as_ref().map(|a| a.as_str()),
                &f.config_sealed,
                &f.disabled,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// Replaces a source's fields; a change of configuration or `disabled` makes its
/// consumer start again (the runner compares `updated_at`).
pub async fn update(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &BrokerSourceId,
    f: &Fields,
) -> Result<Option<BrokerSource>, StoreError> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE broker_sources SET name = $3, app_id = $4, config_sealed = $5, disabled = $6,
                    last_error = CASE WHEN config_sealed = $5 THEN last_error END, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
            ),
            &[
                &tenant.as_str(),
                &id.as_str(),
                &f.name,
                &f.app_id.as_ref().map(|a| a.as_str()),
                &f.config_sealed,
                &f.disabled,
            ],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &BrokerSourceId,
) -> Result<Option<BrokerSource>, StoreError> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM broker_sources WHERE tenant_id = $1 AND id = $2"),
            &[&tenant.as_str(), &id.as_str()],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// A page of the tenant's sources, in id order unless the page asks otherwise.
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    page: &PageRequest,
) -> Result<Page<BrokerSource>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM broker_sources WHERE tenant_id = $1 AND ($2::text IS NULL OR id {cmp} $2)
                 ORDER BY id {dir} LIMIT $3"
            ),
            &[&tenant.as_str(), &key, &page.fetch_limit()],
        )
        .await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |s| s.id.to_string()))
}

/// How many sources the tenant has.
pub async fn count(db: &impl GenericClient, tenant: &TenantId) -> Result<i64, StoreError> {
    Ok(db
        .query_one("SELECT count(*) AS n FROM broker_sources WHERE tenant_id = $1", &[&tenant.as_str()])
        .await?
        .get("n"))
}

/// Deletes a source and (up to 10,000 of) its dead letters: the rest, unreachable
/// once the source is gone, go with the pruning of their age.
pub async fn delete(db: &impl GenericClient, tenant: &TenantId, id: &BrokerSourceId) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "WITH s AS (DELETE FROM broker_sources WHERE tenant_id = $1 AND id = $2 RETURNING id),
                  d AS (DELETE FROM broker_dead_letters WHERE (tenant_id, id) IN (
                      SELECT tenant_id, id FROM broker_dead_letters WHERE tenant_id = $1 AND source_id = $2
                      LIMIT 10000))
             SELECT count(*) AS n FROM s",
            &[&tenant.as_str(), &id.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>("n") == 1)
}

/// Takes or keeps the lease of the sources `me` may consume, of every tenant:
/// those it holds (renewed) and, if it holds fewer than `most`, one more whose
/// lease has passed, up to four a look (so processes share them). Skips disabled
/// sources and the sources of disabled or deleted tenants: their consumers stop
/// when their lease is not renewed. Returns what `me` holds now.
pub async fn lease(
    db: &impl GenericClient,
    me: &str,
    lease_secs: f64,
    most: i64,
) -> Result<Vec<BrokerSource>, StoreError> {
    let rows = db
        .query(
            &format!(
                "WITH live AS (
                    SELECT s.tenant_id, s.id, s.held_by FROM broker_sources s
                    JOIN tenants t ON t.id = s.tenant_id AND NOT t.disabled AND t.deleted_at IS NULL
                    WHERE NOT s.disabled
                 ), mine AS (
                    SELECT tenant_id, id FROM live WHERE held_by = $1
                 ), more AS (
                    SELECT s.tenant_id, s.id FROM broker_sources s JOIN live l USING (tenant_id, id)
                    WHERE (s.held_by IS NULL OR s.held_until < now()) AND (SELECT count(*) FROM mine) < $3
                    ORDER BY s.held_until NULLS FIRST LIMIT 4 FOR UPDATE OF s SKIP LOCKED
                 )
                 UPDATE broker_sources s SET held_by = $1, held_until = now() + make_interval(secs => $2)
                 WHERE (s.tenant_id, s.id) IN (SELECT * FROM mine UNION ALL SELECT * FROM more)
                   AND (s.held_by = $1 OR s.held_by IS NULL OR s.held_until < now())
                 RETURNING {}",
                COLUMNS.split(", ").map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ")
            ),
            &[&me, &lease_secs, &most],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// Records how the consumer's last read went: `error` `None` is a read without one.
pub async fn read_went(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &BrokerSourceId,
    error: Option<&str>,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE broker_sources SET last_read_at = CASE WHEN $3::text IS NULL THEN now() ELSE last_read_at END,
            last_error = $3
         WHERE tenant_id = $1 AND id = $2",
        &[&tenant.as_str(), &id.as_str(), &error],
    )
    .await?;
    Ok(())
}

/// A broker message set aside.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub id: i64,
    pub broker_id: Option<String>,
    pub reason: String,
    pub body: Option<Vec<u8>>,
    pub headers: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
}

/// Text Postgres stores: NUL, which it refuses in `text` and `jsonb`, replaced.
fn storable(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

/// A dead letter's headers: at most 64, names and values cut to 256 and 1,024
/// characters, every string storable.
fn kept_headers(headers: &serde_json::Value) -> serde_json::Value {
    let cut = |s: &str, n: usize| storable(&s.chars().take(n).collect::<String>());
    match headers {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .take(64)
                .map(|(k, v)| (cut(k, 256), serde_json::Value::String(cut(v.as_str().unwrap_or_default(), 1024))))
                .collect(),
        ),
        _ => serde_json::Value::Null,
    }
}

/// Sets a broker message aside (its body cut to 64 KiB, its headers bounded,
/// its text made storable: a message that cannot be set aside would be held
/// for ever, and hold its queue).
pub async fn dead_letter(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &BrokerSourceId,
    broker_id: Option<&str>,
    reason: &str,
    body: &[u8],
    headers: &serde_json::Value,
) -> Result<(), StoreError> {
    let body = &body[..body.len().min(64 * 1024)];
    let broker_id = broker_id.map(|b| storable(&b.chars().take(512).collect::<String>()));
    let reason = storable(&reason.chars().take(1024).collect::<String>());
    db.execute(
        "INSERT INTO broker_dead_letters (tenant_id, source_id, broker_id, reason, body, headers)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[&tenant.as_str(), &source.as_str(), &broker_id, &reason, &body, &kept_headers(headers)],
    )
    .await?;
    Ok(())
}

/// A source's dead letters, newest first, before `before`, at most `limit`.
pub async fn dead_letters(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &BrokerSourceId,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<DeadLetter>, StoreError> {
    let rows = db
        .query(
            "SELECT id, broker_id, reason, body, headers, created_at FROM broker_dead_letters
             WHERE tenant_id = $1 AND source_id = $2 AND ($3::bigint IS NULL OR id < $3)
             ORDER BY id DESC LIMIT $4",
            &[&tenant.as_str(), &source.as_str(), &before, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| DeadLetter {
            id: r.get("id"),
            broker_id: r.get("broker_id"),
            reason: r.get("reason"),
            body: r.get("body"),
            headers: r.get("headers"),
            created_at: r.get("created_at"),
        })
        .collect())
}

/// Forgets up to 10,000 dead letters older than 30 days, of every tenant (the
/// caller runs it again while it finds that many).
pub async fn prune_dead_letters(db: &impl GenericClient) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "DELETE FROM broker_dead_letters WHERE (tenant_id, id) IN (
                SELECT tenant_id, id FROM broker_dead_letters
                WHERE created_at < now() - interval '30 days' LIMIT 10000)",
            &[],
        )
        .await?)
}
