//! The `event_types` table: a tenant's catalogue of event type names.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::TenantId;

#[derive(Debug, Clone)]
pub struct EventType {
    pub name: String,
    pub description: String,
    pub archived: bool,
    pub deprecated: bool,
    pub schemas: Option<Value>,
    pub feature_flag: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "name, description, archived, deprecated, schemas, feature_flag, created_at, updated_at";

fn from_row(r: &Row) -> EventType {
    EventType {
        name: r.get("name"),
        description: r.get("description"),
        archived: r.get("archived"),
        deprecated: r.get("deprecated"),
        schemas: r.get("schemas"),
        feature_flag: r.get("feature_flag"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

pub async fn insert(db: &impl GenericClient, tenant: &TenantId, e: &EventType) -> Result<EventType, StoreError> {
    let sql = format!(
        "INSERT INTO event_types (tenant_id, name, description, archived, deprecated, schemas, feature_flag)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    );
    let row = db
        .query_one(
            &sql,
            &[&tenant.as_str(), &e.name, &e.description, &e.archived, &e.deprecated, &e.schemas, &e.feature_flag],
        )
        .await?;
    Ok(from_row(&row))
}

/// Inserts or replaces (PUT); returns the row and whether it was created.
pub async fn upsert(
    db: &impl GenericClient,
    tenant: &TenantId,
    e: &EventType,
) -> Result<(EventType, bool), StoreError> {
    let sql = format!(
        "INSERT INTO event_types (tenant_id, name, description, archived, deprecated, schemas, feature_flag)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (tenant_id, name) DO UPDATE SET description = EXCLUDED.description,
            archived = EXCLUDED.archived, deprecated = EXCLUDED.deprecated, schemas = EXCLUDED.schemas,
            feature_flag = EXCLUDED.feature_flag, updated_at = now()
         RETURNING {COLUMNS}, (xmax = 0) AS created"
    );
    let row = db
        .query_one(
            &sql,
            &[&tenant.as_str(), &e.name, &e.description, &e.archived, &e.deprecated, &e.schemas, &e.feature_flag],
        )
        .await?;
    Ok((from_row(&row), row.get("created")))
}

pub async fn get(db: &impl GenericClient, tenant: &TenantId, name: &str) -> Result<Option<EventType>, StoreError> {
    get_visible(db, tenant, name, None).await
}

/// The event type, its row locked until the caller's transaction ends (a
/// PATCH's read, merge and write, so a concurrent PATCH of another field is kept).
pub async fn get_for_update(
    db: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
) -> Result<Option<EventType>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM event_types WHERE tenant_id = $1 AND name = $2 FOR NO KEY UPDATE");
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &name]).await?.as_ref().map(from_row))
}

/// An event type as a caller with these feature flags sees it: `None` sees all;
/// `Some(flags)` not one behind a flag outside `flags`.
pub async fn get_visible(
    db: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
    flags: Option<&[String]>,
) -> Result<Option<EventType>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM event_types WHERE tenant_id = $1 AND name = $2
           AND ($3::text[] IS NULL OR feature_flag IS NULL OR feature_flag = ANY ($3))"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &name, &flags]).await?.as_ref().map(from_row))
}

/// A page of event types, as a caller with these feature flags sees them (see
/// [`get_visible`]).
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    page: &PageRequest,
    include_archived: bool,
    flags: Option<&[String]>,
) -> Result<Page<EventType>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let sql = format!(
        "SELECT {COLUMNS} FROM event_types WHERE tenant_id = $1 AND ($2::text IS NULL OR name {cmp} $2)
           AND ($3 OR NOT archived)
           AND ($5::text[] IS NULL OR feature_flag IS NULL OR feature_flag = ANY ($5))
         ORDER BY name {dir} LIMIT $4"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &key, &include_archived, &page.fetch_limit(), &flags]).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |e| e.name.clone()))
}

/// Archives (the default) or, with `expunge`, deletes an event type.
pub async fn delete(db: &impl GenericClient, tenant: &TenantId, name: &str, expunge: bool) -> Result<bool, StoreError> {
    let sql = if expunge {
        "DELETE FROM event_types WHERE tenant_id = $1 AND name = $2"
    } else {
        "UPDATE event_types SET archived = true, updated_at = now() WHERE tenant_id = $1 AND name = $2"
    };
    Ok(db.execute(sql, &[&tenant.as_str(), &name]).await? == 1)
}

/// Archives every live event type of the tenant not named in `keep`; the names archived.
pub async fn archive_except(
    db: &impl GenericClient,
    tenant: &TenantId,
    keep: &[String],
) -> Result<Vec<String>, StoreError> {
    let rows = db
        .query(
            "UPDATE event_types SET archived = true, updated_at = now()
             WHERE tenant_id = $1 AND NOT archived AND NOT (name = ANY ($2))
             RETURNING name",
            &[&tenant.as_str(), &keep],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The live event types of the tenant not named in `keep` (what `archive_except` would archive).
pub async fn live_except(
    db: &impl GenericClient,
    tenant: &TenantId,
    keep: &[String],
) -> Result<Vec<String>, StoreError> {
    let rows = db
        .query(
            "SELECT name FROM event_types WHERE tenant_id = $1 AND NOT archived AND NOT (name = ANY ($2)) ORDER BY name",
            &[&tenant.as_str(), &keep],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Those of `names` that are no live event type of the tenant (none, archived,
/// or behind a feature flag not in `flags`, when the caller has flags), in the
/// order given: what an endpoint may not subscribe to.
pub async fn unknown(
    db: &impl GenericClient,
    tenant: &TenantId,
    names: &[String],
    flags: Option<&[String]>,
) -> Result<Vec<String>, StoreError> {
    let rows = db
        .query(
            "SELECT n FROM unnest($2::text[]) WITH ORDINALITY AS u (n, i)
             WHERE NOT EXISTS (SELECT 1 FROM event_types t WHERE t.tenant_id = $1 AND t.name = u.n AND NOT t.archived
                AND ($3::text[] IS NULL OR t.feature_flag IS NULL OR t.feature_flag = ANY ($3)))
             ORDER BY i",
            &[&tenant.as_str(), &names, &flags],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
