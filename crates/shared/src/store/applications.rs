//! The `applications` table: a tenant's Svix-style applications.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{AppId, Ref, TenantId};

#[derive(Debug, Clone)]
pub struct Application {
    pub id: AppId,
    pub uid: Option<String>,
    pub name: String,
    pub throttle_rate: Option<i32>,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The writable fields; create and replace take all of them.
#[derive(Debug, Clone)]
pub struct ApplicationFields {
    pub uid: Option<String>,
    pub name: String,
    pub throttle_rate: Option<i32>,
    pub metadata: Value,
}

const COLUMNS: &str = "id, uid, name, throttle_rate, metadata, created_at, updated_at";

fn from_row(r: &Row) -> Application {
    Application {
        id: AppId::from_db(r.get("id")),
        uid: r.get("uid"),
        name: r.get("name"),
        throttle_rate: r.get("throttle_rate"),
        metadata: r.get("metadata"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

pub async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &AppId,
    f: &ApplicationFields,
) -> Result<Application, StoreError> {
    let sql = format!(
        "INSERT INTO applications (tenant_id, id, uid, name, throttle_rate, metadata)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    );
    let row =
        db.query_one(&sql, &[&tenant.as_str(), &id.as_str(), &f.uid, &f.name, &f.throttle_rate, &f.metadata]).await?;
    Ok(from_row(&row))
}

/// An application by id or by uid.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &Ref<AppId>,
) -> Result<Option<Application>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM applications WHERE tenant_id = $1 AND (id = $2 OR uid = $2) AND NOT operational
         ORDER BY (id = $2) DESC LIMIT 1"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str()]).await?.as_ref().map(from_row))
}

/// The application, its row locked until the caller's transaction ends (a
/// PATCH's read, merge and write, so a concurrent PATCH of another field is kept).
pub async fn get_for_update(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
) -> Result<Option<Application>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM applications WHERE tenant_id = $1 AND id = $2 AND NOT operational FOR NO KEY UPDATE"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str(), &app.as_str()]).await?.as_ref().map(from_row))
}

pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    page: &PageRequest,
) -> Result<Page<Application>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let sql = format!(
        "SELECT {COLUMNS} FROM applications WHERE tenant_id = $1 AND NOT operational AND ($2::text IS NULL OR id {cmp} $2)
         ORDER BY id {dir} LIMIT $3"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &key, &page.fetch_limit()]).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |a| a.id.to_string()))
}

/// Replaces every writable field.
pub async fn replace(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &AppId,
    f: &ApplicationFields,
) -> Result<Option<Application>, StoreError> {
    let sql = format!(
        "UPDATE applications SET uid = $3, name = $4, throttle_rate = $5, metadata = $6, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND NOT operational RETURNING {COLUMNS}"
    );
    let row =
        db.query_opt(&sql, &[&tenant.as_str(), &id.as_str(), &f.uid, &f.name, &f.throttle_rate, &f.metadata]).await?;
    Ok(row.as_ref().map(from_row))
}

/// Inserts an application within `cap` applications per tenant: `Ok(Err(n))`
/// when the tenant has `n` already, the most allowed. Run it in a transaction: the
/// tenant's row stays locked until the commit, so that concurrent creations
/// cannot pass the cap together.
pub async fn insert_capped(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &AppId,
    f: &ApplicationFields,
    cap: Option<u64>,
) -> Result<Result<Application, i64>, StoreError> {
    if let Some(cap) = cap {
        db.query_opt("SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE", &[&tenant.as_str()]).await?;
        let row = db
            .query_one(
                "SELECT count(*) FROM applications WHERE tenant_id = $1 AND NOT operational",
                &[&tenant.as_str()],
            )
            .await?;
        let n: i64 = row.get(0);
        if n as u64 >= cap {
            return Ok(Err(n));
        }
    }
    Ok(Ok(insert(db, tenant, id, f).await?))
}

/// Up to `limit` of the tenant's applications (not its operational one), in id
/// order: an environment export.
pub async fn all(db: &impl GenericClient, tenant: &TenantId, limit: i64) -> Result<Vec<Application>, StoreError> {
    let sql =
        format!("SELECT {COLUMNS} FROM applications WHERE tenant_id = $1 AND NOT operational ORDER BY id LIMIT $2");
    Ok(db.query(&sql, &[&tenant.as_str(), &limit]).await?.iter().map(from_row).collect())
}

/// Whether no application of the tenant (its operational one included) has this
/// id: an import keeps a document's ids only where they are free.
pub async fn id_free(db: &impl GenericClient, tenant: &TenantId, id: &AppId) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT NOT EXISTS (SELECT 1 FROM applications WHERE tenant_id = $1 AND id = $2)",
            &[&tenant.as_str(), &id.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

/// Sets (or, with `None`, clears) the addresses an application's alerts go to;
/// false if there is no such application.
pub async fn set_alert_email(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    email: Option<&str>,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE applications SET alert_email = $3 WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &app.as_str(), &email],
        )
        .await?;
    Ok(n == 1)
}
