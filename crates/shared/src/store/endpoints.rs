//! The `endpoints` table: where an application's messages are delivered.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::filter::Filter;
use crate::ids::{AppId, EndpointId, Ref, TenantId};
use crate::status::EndpointKind;

#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: EndpointId,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub version: i32,
    pub disabled: bool,
    pub event_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    pub throttle_rate: Option<i32>,
    pub metadata: Value,
    pub headers: Value,
    pub secret: Vec<u8>,
    pub old_secret: Option<Vec<u8>>,
    pub old_secret_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// An HTTP endpoint, or a destination of another kind.
    pub kind: EndpointKind,
    /// A destination's configuration, sealed; `None` for an HTTP endpoint.
    pub destination: Option<Vec<u8>>,
    pub batch_size: Option<i32>,
    pub max_wait_secs: Option<i32>,
    /// The first failure since its last success, if it is failing.
    pub failing_since: Option<DateTime<Utc>>,
    /// A keyed FIFO endpoint's key path.
    pub fifo_key: Option<Vec<String>>,
    /// When its OAuth client, client certificate or server CA last changed, if it has any.
    pub auth_at: Option<DateTime<Utc>>,
    /// Its content filter's text, if it has one (`crate::filter`).
    pub filter: Option<String>,
}

impl Endpoint {
    /// What is left to show of a deleted endpoint: its id, the URL it was last
    /// sent to, and (for want of its own dates) when the delivery was made.
    pub fn gone(id: EndpointId, url: String, at: DateTime<Utc>) -> Self {
        Endpoint {
            id,
            uid: None,
            url,
            description: String::new(),
            version: 1,
            disabled: true,
            event_types: None,
            channels: None,
            throttle_rate: None,
            metadata: Value::Object(Default::default()),
            headers: Value::Object(Default::default()),
            secret: Vec::new(),
            old_secret: None,
            old_secret_until: None,
            created_at: at,
            updated_at: at,
            kind: EndpointKind::Http,
            destination: None,
            batch_size: None,
            max_wait_secs: None,
            failing_since: None,
            fifo_key: None,
            auth_at: None,
            filter: None,
        }
    }
}

/// What makes an endpoint row a destination: its kind, its sealed
/// configuration, and how it batches.
#[derive(Debug, Clone)]
pub struct DestinationFields {
    pub kind: EndpointKind,
    pub sealed: Vec<u8>,
    pub batch_size: i32,
    pub max_wait_secs: i32,
    /// A keyed FIFO endpoint's key, as a path into the payload (not a secret:
    /// the fan-out reads it).
    pub fifo_key: Option<Vec<String>>,
}

/// The fields create and replace write.
#[derive(Debug, Clone)]
pub struct EndpointFields {
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub disabled: bool,
    pub event_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    pub throttle_rate: Option<i32>,
    pub metadata: Value,
    /// The content filter, checked: its text, and the predicate the fan-out evaluates.
    pub filter: Option<Filter>,
}

pub(super) const COLUMNS: &str = "id, uid, url, description, version, disabled, event_types, channels, throttle_rate,
    metadata, headers, secret, old_secret, old_secret_until, created_at, updated_at, kind, destination,
    batch_size, max_wait_secs, failing_since, fifo_key, auth_at, filter";

/// An endpoint from a row holding [`COLUMNS`], read by name: a row may hold other
/// columns too, none named as one of these.
pub(super) fn from_row(r: &Row) -> Endpoint {
    Endpoint {
        id: EndpointId::from_db(r.get("id")),
        uid: r.get("uid"),
        url: r.get("url"),
        description: r.get("description"),
        version: r.get("version"),
        disabled: r.get("disabled"),
        event_types: r.get("event_types"),
        channels: r.get("channels"),
        throttle_rate: r.get("throttle_rate"),
        metadata: r.get("metadata"),
        headers: r.get("headers"),
        secret: r.get("secret"),
        old_secret: r.get("old_secret"),
        old_secret_until: r.get("old_secret_until"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        kind: EndpointKind::from_db(r.get("kind")),
        destination: r.get("destination"),
        batch_size: r.get("batch_size"),
        max_wait_secs: r.get("max_wait_secs"),
        failing_since: r.get("failing_since"),
        fifo_key: r.get("fifo_key"),
        auth_at: r.get("auth_at"),
        filter: r.get("filter"),
    }
}

/// Locks the application's row and counts its endpoints: run in the transaction
/// that inserts one, so that concurrent creations cannot pass a cap together.
pub async fn lock_and_count(db: &impl GenericClient, tenant: &TenantId, app: &AppId) -> Result<i64, StoreError> {
    db.query_opt(
        // NO KEY: it serialises endpoint creations of one application without
        // blocking the publishes that reference the row (they take KEY SHARE).
        "SELECT 1 FROM applications WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE",
        &[&tenant.as_str(), &app.as_str()],
    )
    .await?;
    let row = db
        .query_one(
            "SELECT count(*) FROM endpoints WHERE tenant_id = $1 AND app_id = $2",
            &[&tenant.as_str(), &app.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

pub async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    f: &EndpointFields,
    sealed_secret: &[u8],
) -> Result<Endpoint, StoreError> {
    let sql = format!(
        "INSERT INTO endpoints (tenant_id, app_id, id, uid, url, description, disabled, event_types,
            channels, throttle_rate, metadata, secret, filter, filter_path)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::text::jsonpath) RETURNING {COLUMNS}"
    );
    let row = db
        .query_one(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &id.as_str(),
                &f.uid,
                &f.url,
                &f.description,
                &f.disabled,
                &f.event_types,
                &f.channels,
                &f.throttle_rate,
                &f.metadata,
                &sealed_secret,
                &f.filter.as_ref().map(|f| &f.text),
                &f.filter.as_ref().map(|f| &f.path),
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// An endpoint of the application by id or uid.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &Ref<EndpointId>,
) -> Result<Option<Endpoint>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND (id = $3 OR uid = $3)
         ORDER BY (id = $3) DESC LIMIT 1"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &endpoint.as_str()]).await?.as_ref().map(from_row))
}

/// The endpoint, its row locked until the caller's transaction ends: a PATCH
/// reads, merges and writes under it, so it loses no change made meanwhile (a
/// concurrent PATCH of another field, the recorder disabling the endpoint).
pub async fn get_for_update(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
) -> Result<Option<Endpoint>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR NO KEY UPDATE");
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str(), &id.as_str()]).await?.as_ref().map(from_row))
}

/// A page of the application's HTTP endpoints.
pub async fn list_http(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    page: &PageRequest,
) -> Result<Page<Endpoint>, StoreError> {
    list_of(db, tenant, app, page, false).await
}

/// A page of the application's destinations (endpoint rows of another kind).
pub async fn list_destinations(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    page: &PageRequest,
) -> Result<Page<Endpoint>, StoreError> {
    list_of(db, tenant, app, page, true).await
}

async fn list_of(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    page: &PageRequest,
    destinations: bool,
) -> Result<Page<Endpoint>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!(
        "SELECT {COLUMNS} FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND ($3::text IS NULL OR id {cmp} $3)
            AND (kind NOT IN {http}) = $5
         ORDER BY id {dir} LIMIT $4",
        http = EndpointKind::sql_set(|k| k == EndpointKind::Http)
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &app.as_str(), &key, &page.fetch_limit(), &destinations]).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |e| e.id.to_string()))
}

/// Replaces the writable fields; re-enabling an endpoint clears its failure streak.
pub async fn replace(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    f: &EndpointFields,
) -> Result<Option<Endpoint>, StoreError> {
    let sql = format!(
        "UPDATE endpoints SET uid = $4, url = $5, description = $6,
            failing_since = CASE WHEN disabled AND NOT $7 THEN NULL ELSE failing_since END,
            -- Re-enabled: failures made before now, recorded late, begin no streak.
            last_success_at = CASE WHEN disabled AND NOT $7 THEN GREATEST(last_success_at, now())
                ELSE last_success_at END,
            disabled = $7, event_types = $8, channels = $9, throttle_rate = $10, metadata = $11,
            filter = $12, filter_path = $13::text::jsonpath, updated_at = now()
         WHERE tenant_id = $1 AND app_id = $2 AND id = $3 RETURNING {COLUMNS}"
    );
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &id.as_str(),
                &f.uid,
                &f.url,
                &f.description,
                &f.disabled,
                &f.event_types,
                &f.channels,
                &f.throttle_rate,
                &f.metadata,
                &f.filter.as_ref().map(|f| &f.text),
                &f.filter.as_ref().map(|f| &f.path),
            ],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// Makes a row just inserted a destination, or sets a destination's configuration.
pub async fn set_destination(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    d: &DestinationFields,
) -> Result<Option<Endpoint>, StoreError> {
    if !super::endpoint_kinds::admitted(db, d.kind).await? {
        return Err(StoreError::KindNotAdmitted);
    }
    let sql = format!(
        "UPDATE endpoints SET kind = $4, destination = $5, batch_size = $6, max_wait_secs = $7, fifo_key = $8,
            updated_at = now()
         WHERE tenant_id = $1 AND app_id = $2 AND id = $3 RETURNING {COLUMNS}"
    );
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &id.as_str(),
                &d.kind.code(),
                &d.sealed,
                &d.batch_size,
                &d.max_wait_secs,
                &d.fifo_key,
            ],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

pub async fn delete(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
) -> Result<bool, StoreError> {
    // Its wake stays while deliveries of it wait: they are claimed, end unsent,
    // and the raise that finds nothing waiting drops the wake (`wakes::raise`).
    let n = db
        .execute(
            "DELETE FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
            &[&tenant.as_str(), &app.as_str(), &id.as_str()],
        )
        .await?;
    Ok(n == 1)
}

pub async fn set_headers(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    headers: &Value,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE endpoints SET headers = $4, updated_at = now() WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
            &[&tenant.as_str(), &app.as_str(), &id.as_str(), headers],
        )
        .await?;
    Ok(n == 1)
}

/// Replaces the headers only if they are still `old`: the resealer of headers
/// stored before sealing must not clobber a change made meanwhile.
pub async fn replace_headers(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    old: &Value,
    new: &Value,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE endpoints SET headers = $5 WHERE tenant_id = $1 AND app_id = $2 AND id = $3 AND headers = $4",
            &[&tenant.as_str(), &app.as_str(), &id.as_str(), old, new],
        )
        .await?;
    Ok(n == 1)
}

/// Endpoints whose custom headers may be stored in clear (not the sole-`$sealed`
/// form), across tenants, for the resealer: up to `limit`, in key order after
/// `after`, so one walk visits each row once.
pub async fn unsealed_headers(
    db: &impl GenericClient,
    after: Option<&(TenantId, AppId, EndpointId)>,
    limit: i64,
) -> Result<Vec<(TenantId, AppId, EndpointId, Value)>, StoreError> {
    let (t, a, e) = after.map_or(("", "", ""), |(t, a, e)| (t.as_str(), a.as_str(), e.as_str()));
    let rows = db
        .query(
            "SELECT tenant_id, app_id, id, headers FROM endpoints
             WHERE (tenant_id, app_id, id) > ($1, $2, $3)
               AND headers <> '{}'::jsonb
               AND NOT (headers ? '$sealed' AND (SELECT count(*) FROM jsonb_object_keys(headers)) = 1
                        AND length(headers->>'$sealed') >= 37)
             ORDER BY tenant_id, app_id, id LIMIT $4",
            &[&t, &a, &e, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                TenantId::from_db(r.get("tenant_id")),
                AppId::from_db(r.get("app_id")),
                EndpointId::from_db(r.get("id")),
                r.get("headers"),
            )
        })
        .collect())
}

/// Makes `new_secret` current; the current one keeps signing until `old_until`.
pub async fn rotate_secret(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    new_secret: &[u8],
    old_until: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE endpoints SET old_secret = secret, old_secret_until = $5, secret = $4, updated_at = now()
             WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
            &[&tenant.as_str(), &app.as_str(), &id.as_str(), &new_secret, &old_until],
        )
        .await?;
    Ok(n == 1)
}

/// Up to `limit` of the tenant's HTTP endpoints, of every application but the
/// operational one, in (application, id) order: an environment export.
pub async fn all_http(
    db: &impl GenericClient,
    tenant: &TenantId,
    limit: i64,
) -> Result<Vec<(AppId, Endpoint)>, StoreError> {
    let cols = COLUMNS.split(',').map(|c| format!("e.{}", c.trim())).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT e.app_id, {cols} FROM endpoints e JOIN applications a ON a.tenant_id = e.tenant_id AND a.id = e.app_id
         WHERE e.tenant_id = $1 AND e.kind IN {http} AND NOT a.operational ORDER BY e.app_id, e.id LIMIT $2",
        http = EndpointKind::sql_set(|k| k == EndpointKind::Http)
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &limit]).await?;
    Ok(rows.iter().map(|r| (AppId::from_db(r.get("app_id")), from_row(r))).collect())
}

/// Whether no endpoint of the tenant has this id (an import keeps a document's
/// ids only where they are free).
pub async fn id_free(db: &impl GenericClient, tenant: &TenantId, id: &EndpointId) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT NOT EXISTS (SELECT 1 FROM endpoints WHERE tenant_id = $1 AND id = $2)",
            &[&tenant.as_str(), &id.as_str()],
        )
        .await?;
    Ok(row.get(0))
}
