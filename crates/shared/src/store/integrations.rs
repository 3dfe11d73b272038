//! The `integrations` table: an application's named keys for its customer's
//! third-party tools (Svix's `integration`). A key reads
//! `integsk_<tenant id>_<64 hex>`; it is kept sealed with the tenant's key (shown
//! back on request) and as a peppered hash (looked up when it authenticates).

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    crypto::random_hex,
    ids::{ApiKeyId, AppId, IntegrationId, TenantId},
};

pub const KEY_PREFIX: &str = "integsk_";

/// A new key for the tenant, in clear: the caller seals and hashes it.
pub fn new_key(tenant: &TenantId) -> String {
    format!("{KEY_PREFIX}{tenant}_{}", random_hex(32))
}

/// The tenant a presented key names, if it has a key's shape.
pub fn tenant_of_key(key: &str) -> Option<TenantId> {
    super::api_keys::tenant_of(key, KEY_PREFIX)
}

#[derive(Debug, Clone)]
pub struct Integration {
    pub id: IntegrationId,
    pub app_id: AppId,
    pub name: String,
    pub feature_flags: Vec<String>,
    pub key_sealed: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, app_id, name, feature_flags, key_sealed, created_at, updated_at";

fn from_row(r: &Row) -> Integration {
    Integration {
        id: IntegrationId::from_db(r.get("id")),
        app_id: AppId::from_db(r.get("app_id")),
        name: r.get("name"),
        feature_flags: r.get("feature_flags"),
        key_sealed: r.get("key_sealed"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

/// What a new or changed integration holds besides its key.
pub struct Fields<'a> {
    pub name: &'a str,
    pub feature_flags: &'a [String],
}

#[allow(clippy::too_many_arguments)]
pub async fn create(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &IntegrationId,
    f: &Fields<'_>,
    key_sealed: &[u8],
    key_hash: &[u8],
    minted_by: &ApiKeyId,
) -> Result<Integration, StoreError> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO integrations (tenant_id, app_id, id, name, feature_flags, key_sealed, key_hash, api_key_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
            ),
            &[
                &tenant.as_str(),
                &app.as_str(),
                &id.as_str(),
                &f.name,
                &f.feature_flags,
                &key_sealed,
                &key_hash,
                &minted_by.as_str(),
            ],
        )
        .await?;
    Ok(from_row(&row))
}

pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &str,
) -> Result<Option<Integration>, StoreError> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM integrations WHERE tenant_id = $1 AND app_id = $2 AND id = $3"),
            &[&tenant.as_str(), &app.as_str(), &id],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// A page of the application's integrations, oldest first unless the page asks otherwise.
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    page: &PageRequest,
) -> Result<Page<Integration>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM integrations WHERE tenant_id = $1 AND app_id = $2
                   AND ($3::text IS NULL OR id {cmp} $3)
                 ORDER BY id {dir} LIMIT $4"
            ),
            &[&tenant.as_str(), &app.as_str(), &key, &page.fetch_limit()],
        )
        .await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |i| i.id.to_string()))
}

/// Sets the name and feature flags; `None` when there is no such integration.
pub async fn update(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &IntegrationId,
    f: &Fields<'_>,
    caches: &impl super::Forget,
) -> Result<Option<Integration>, StoreError> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE integrations SET name = $4, feature_flags = $5, updated_at = now()
                 WHERE tenant_id = $1 AND app_id = $2 AND id = $3 RETURNING {COLUMNS}"
            ),
            &[&tenant.as_str(), &app.as_str(), &id.as_str(), &f.name, &f.feature_flags],
        )
        .await?;
    caches.forget_integration_keys();
    Ok(row.as_ref().map(from_row))
}

/// Replaces the key, made by `minted_by`: the former one stops opening anything at once.
#[allow(clippy::too_many_arguments)]
pub async fn set_key(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &IntegrationId,
    key_sealed: &[u8],
    key_hash: &[u8],
    minted_by: &ApiKeyId,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE integrations SET key_sealed = $4, key_hash = $5, api_key_id = $6, updated_at = now()
             WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
            &[&tenant.as_str(), &app.as_str(), &id.as_str(), &key_sealed, &key_hash, &minted_by.as_str()],
        )
        .await?;
    caches.forget_integration_keys();
    Ok(n == 1)
}

pub async fn delete(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    id: &IntegrationId,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "DELETE FROM integrations WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
            &[&tenant.as_str(), &app.as_str(), &id.as_str()],
        )
        .await?;
    caches.forget_integration_keys();
    Ok(n == 1)
}

/// Who a key acts for: its application (id and uid) and feature flags.
#[derive(Debug, Clone)]
pub struct KeyHolder {
    pub app_id: AppId,
    pub app_uid: Option<String>,
    pub feature_flags: Vec<String>,
}

/// The integration whose key hashes to `key_hash`, while its tenant is live and
/// enabled, the API key that made it is not revoked, and its application is not
/// being erased.
pub async fn authenticate(
    db: &impl GenericClient,
    tenant: &TenantId,
    key_hash: &[u8],
) -> Result<Option<KeyHolder>, StoreError> {
    let row = db
        .query_opt(
            "SELECT i.app_id, a.uid, i.feature_flags FROM integrations i
             JOIN applications a ON a.tenant_id = i.tenant_id AND a.id = i.app_id
             JOIN tenants t ON t.id = i.tenant_id
             JOIN api_keys k ON k.tenant_id = i.tenant_id AND k.id = i.api_key_id AND k.revoked_at IS NULL
             WHERE i.tenant_id = $1 AND i.key_hash = $2 AND t.deleted_at IS NULL AND NOT t.disabled
               AND NOT EXISTS (SELECT 1 FROM erasures e WHERE e.tenant_id = i.tenant_id AND e.app_id = i.app_id)",
            &[&tenant.as_str(), &key_hash],
        )
        .await?;
    Ok(row.map(|r| KeyHolder {
        app_id: AppId::from_db(r.get("app_id")),
        app_uid: r.get("uid"),
        feature_flags: r.get("feature_flags"),
    }))
}

/// How many integrations the application has.
pub async fn count(db: &impl GenericClient, tenant: &TenantId, app: &AppId) -> Result<i64, StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) FROM integrations WHERE tenant_id = $1 AND app_id = $2",
            &[&tenant.as_str(), &app.as_str()],
        )
        .await?;
    Ok(row.get(0))
}
