//! The `api_keys` table: peppered hashes of tenants' API keys, never the keys.
//!
//! A key reads `hgk_<tenant id>_<64 hex>`: the tenant id in the key lets the lookup
//! take the tenant first, as every store call does, and route to the tenant's shard.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::{
    crypto::{random_hex, ApiKeyHasher},
    ids::{ApiKeyId, TenantId},
};

pub const KEY_PREFIX: &str = "hgk_";

/// A newly issued key: the only moment its clear text exists.
#[derive(Debug)]
pub struct IssuedKey {
    pub id: ApiKeyId,
    pub key: String,
    pub created_at: DateTime<Utc>,
}

/// Splits a presented key into its tenant and checks its shape; `None` if malformed.
pub fn tenant_of_key(key: &str) -> Option<TenantId> {
    tenant_of(key, KEY_PREFIX)
}

/// The tenant of a key shaped `<prefix><tenant id>_<64 hex>` (API keys,
/// integration keys); `None` if it is not of that shape.
pub(super) fn tenant_of(key: &str, prefix: &str) -> Option<TenantId> {
    let rest = key.strip_prefix(prefix)?;
    let (tenant, secret) = rest.rsplit_once('_')?;
    if secret.len() != 64 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    TenantId::parse(tenant).ok()
}

/// Issues a key, with the label that says who holds it (checked by the caller).
pub async fn issue(
    db: &impl GenericClient,
    tenant: &TenantId,
    hasher: &ApiKeyHasher,
    label: Option<&str>,
) -> Result<IssuedKey, StoreError> {
    let id = ApiKeyId::generate();
    let key = format!("{KEY_PREFIX}{tenant}_{}", random_hex(32));
    let row = db
        .query_one(
            "INSERT INTO api_keys (tenant_id, id, key_hash, label) VALUES ($1, $2, $3, $4) RETURNING created_at",
            &[&tenant.as_str(), &id.as_str(), &hasher.hash(&key), &label],
        )
        .await?;
    Ok(IssuedKey { id, key, created_at: row.get(0) })
}

/// The key's id, if the key is live and its tenant is live and enabled.
pub async fn authenticate(
    db: &impl GenericClient,
    tenant: &TenantId,
    key_hash: &[u8],
) -> Result<Option<ApiKeyId>, StoreError> {
    let row = db
        .query_opt(
            "SELECT k.id FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
             WHERE k.tenant_id = $1 AND k.key_hash = $2 AND k.revoked_at IS NULL
               AND t.deleted_at IS NULL AND NOT t.disabled",
            &[&tenant.as_str(), &key_hash],
        )
        .await?;
    Ok(row.map(|r| ApiKeyId::from_db(r.get(0))))
}

/// Whether a key still opens its tenant (not revoked, the tenant live and
/// enabled): what keeps the portal tokens it minted alive.
pub async fn is_live(db: &impl GenericClient, tenant: &TenantId, key: &ApiKeyId) -> Result<bool, StoreError> {
    let row = db
        .query_opt(
            "SELECT 1 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
             WHERE k.tenant_id = $1 AND k.id = $2 AND k.revoked_at IS NULL
               AND t.deleted_at IS NULL AND NOT t.disabled",
            &[&tenant.as_str(), &key.as_str()],
        )
        .await?;
    Ok(row.is_some())
}

/// A key as the console lists it: never the key, only when and whether it lives.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    pub id: ApiKeyId,
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The tenant's keys, newest first (revoked ones too, marked).
pub async fn list(db: &impl GenericClient, tenant: &TenantId) -> Result<Vec<KeyInfo>, StoreError> {
    let rows = db
        .query(
            "SELECT id, created_at, revoked_at, label FROM api_keys WHERE tenant_id = $1 ORDER BY id DESC LIMIT 200",
            &[&tenant.as_str()],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| KeyInfo {
            id: ApiKeyId::from_db(r.get("id")),
            created_at: r.get("created_at"),
            revoked_at: r.get("revoked_at"),
            label: r.get("label"),
        })
        .collect())
}

/// Sets (or with `None` clears) a key's label; returns whether the tenant has the key.
pub async fn set_label(
    db: &impl GenericClient,
    tenant: &TenantId,
    key: &ApiKeyId,
    label: Option<&str>,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE api_keys SET label = $3 WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &key.as_str(), &label],
        )
        .await?;
    Ok(n == 1)
}

/// Revokes a key; returns whether a live key of this tenant had that id.
pub async fn revoke(
    db: &impl GenericClient,
    tenant: &TenantId,
    key: &ApiKeyId,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL",
            &[&tenant.as_str(), &key.as_str()],
        )
        .await?;
    caches.forget_keys();
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_tenant_and_malformed_keys_name_none() {
        let t = TenantId::generate();
        let key = format!("hgk_{t}_{}", "ab".repeat(32));
        assert_eq!(tenant_of_key(&key), Some(t.clone()));
        assert_eq!(tenant_of_key(&format!("hgk_{t}_abc")), None);
        assert_eq!(tenant_of_key(&format!("sk_{t}_{}", "ab".repeat(32))), None);
        assert_eq!(tenant_of_key(&format!("hgk_{t}_{}", "zz".repeat(32))), None);
        assert_eq!(tenant_of_key(""), None);
    }
}
