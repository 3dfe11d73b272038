//! The `tenants` table: the operator's clients.

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    ids::{Ref, TenantId},
    quota::Quotas,
};

/// A tenant as stored.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub id: TenantId,
    pub name: String,
    pub uid: Option<String>,
    pub disabled: bool,
    /// Deliveries carry the `svix-*` header aliases too.
    pub svix_headers: bool,
    /// Retention in days; `None` follows the operator's default.
    pub inbound_days: Option<i32>,
    pub message_days: Option<i32>,
    /// The tenant's own quotas; unset values follow the operator's defaults.
    pub quotas: Quotas,
    /// Private networks this tenant's endpoints may reach (CIDRs, checked when set),
    /// beside the operator-wide `HOOKGATE_EGRESS_ALLOW_NETWORKS`.
    pub egress_allow_networks: Vec<String>,
    /// Its endpoints' transformations may run (the operator's switch; off by default).
    pub transformations: bool,
    /// The tenant turned its transformations off (its own switch).
    pub transformations_off: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A partial update; `None` leaves a field alone, `Some(None)` clears `uid`.
#[derive(Debug, Default)]
pub struct TenantPatch {
    pub name: Option<String>,
    pub uid: Option<Option<String>>,
    pub disabled: Option<bool>,
    pub svix_headers: Option<bool>,
    /// `Some(None)` returns to the operator's default.
    pub inbound_days: Option<Option<i32>>,
    pub message_days: Option<Option<i32>>,
    pub quotas: Option<QuotaPatch>,
    pub egress_allow_networks: Option<Vec<String>>,
    pub transformations: Option<bool>,
}

/// A change of a tenant's quotas: `reset` drops every override first, then the
/// values in `set` are set and the names in `clear` return to the default.
#[derive(Debug, Default)]
pub struct QuotaPatch {
    pub reset: bool,
    pub set: serde_json::Map<String, serde_json::Value>,
    pub clear: Vec<String>,
}

const COLUMNS: &str =
    "id, name, uid, disabled, created_at, updated_at, svix_headers, inbound_days, message_days, quotas, egress_allow_networks, transformations, transformations_off";

/// The operator's own tenant (migration 0020): home of the operational webhook
/// endpoints that receive every tenant's events; listed and found nowhere.
pub const OPERATOR: &str = "tnt_00000000000000000000000000";

fn from_row(r: &Row) -> Tenant {
    Tenant {
        id: TenantId::from_db(r.get("id")),
        name: r.get("name"),
        uid: r.get("uid"),
        disabled: r.get("disabled"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        svix_headers: r.get("svix_headers"),
        inbound_days: r.get("inbound_days"),
        message_days: r.get("message_days"),
        // Written only from a checked `Quotas`; anything else reads as no override.
        quotas: serde_json::from_value(r.get("quotas")).unwrap_or_default(),
        egress_allow_networks: r.get("egress_allow_networks"),
        transformations: r.get("transformations"),
        transformations_off: r.get("transformations_off"),
    }
}

pub async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
    uid: Option<&str>,
) -> Result<Tenant, StoreError> {
    let sql = format!("INSERT INTO tenants (id, name, uid) VALUES ($1, $2, $3) RETURNING {COLUMNS}");
    let row = db.query_one(&sql, &[&tenant.as_str(), &name, &uid]).await?;
    Ok(from_row(&row))
}

/// A live (not deleted) tenant.
pub async fn get(db: &impl GenericClient, tenant: &TenantId) -> Result<Option<Tenant>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM tenants WHERE id = $1 AND deleted_at IS NULL");
    Ok(db.query_opt(&sql, &[&tenant.as_str()]).await?.as_ref().map(from_row))
}

/// A live tenant by id or by uid, as the operator names it in `/admin/v1` paths.
pub async fn find(db: &impl GenericClient, tenant: &Ref<TenantId>) -> Result<Option<Tenant>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM tenants WHERE (id = $1 OR uid = $1) AND deleted_at IS NULL AND id <> '{OPERATOR}'
         ORDER BY (id = $1) DESC LIMIT 1"
    );
    Ok(db.query_opt(&sql, &[&tenant.as_str()]).await?.as_ref().map(from_row))
}

pub async fn list(db: &impl GenericClient, page: &PageRequest) -> Result<Page<Tenant>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let sql = format!(
        "SELECT {COLUMNS} FROM tenants WHERE deleted_at IS NULL AND id <> '{OPERATOR}' AND ($1::text IS NULL OR id {cmp} $1)
         ORDER BY id {dir} LIMIT $2"
    );
    let rows = db.query(&sql, &[&key, &page.fetch_limit()]).await?;
    Ok(Page::from_rows(rows.iter().map(from_row).collect(), page, |t| t.id.to_string()))
}

pub async fn update(
    db: &impl GenericClient,
    tenant: &TenantId,
    patch: &TenantPatch,
    caches: &impl super::Forget,
) -> Result<Option<Tenant>, StoreError> {
    let sql = format!(
        "UPDATE tenants SET
            name = COALESCE($2, name),
            uid = CASE WHEN $3 THEN $4 ELSE uid END,
            disabled = COALESCE($5, disabled),
            enabled_at = CASE WHEN disabled AND NOT COALESCE($5, true) THEN now() ELSE enabled_at END,
            svix_headers = COALESCE($6, svix_headers),
            inbound_days = CASE WHEN $7 THEN $8 ELSE inbound_days END,
            message_days = CASE WHEN $9 THEN $10 ELSE message_days END,
            quotas = ((CASE WHEN $11 THEN '{{}}'::jsonb ELSE quotas END) || $12::jsonb) - $13::text[],
            egress_allow_networks = COALESCE($14::text[], egress_allow_networks),
            transformations = COALESCE($15, transformations),
            updated_at = now()
         WHERE id = $1 AND deleted_at IS NULL
         RETURNING {COLUMNS}"
    );
    let set_uid = patch.uid.is_some();
    let uid = patch.uid.clone().flatten();
    let (set_inbound, inbound) = (patch.inbound_days.is_some(), patch.inbound_days.flatten());
    let (set_message, message) = (patch.message_days.is_some(), patch.message_days.flatten());
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &patch.name,
                &set_uid,
                &uid,
                &patch.disabled,
                &patch.svix_headers,
                &set_inbound,
                &inbound,
                &set_message,
                &message,
                &patch.quotas.as_ref().is_some_and(|q| q.reset),
                &serde_json::Value::Object(patch.quotas.as_ref().map(|q| q.set.clone()).unwrap_or_default()),
                &patch.quotas.as_ref().map(|q| q.clear.clone()).unwrap_or_default(),
                &patch.egress_allow_networks,
                &patch.transformations,
            ],
        )
        .await?;
    // Cached sources carry their tenant's inbound retention too.
    caches.forget_tenant();
    Ok(row.as_ref().map(from_row))
}

/// A live tenant's own quotas (`None` for a tenant gone or disabled).
pub async fn quotas(db: &impl GenericClient, tenant: &TenantId) -> Result<Option<Quotas>, StoreError> {
    let row = db
        .query_opt(
            "SELECT quotas FROM tenants WHERE id = $1 AND deleted_at IS NULL AND NOT disabled",
            &[&tenant.as_str()],
        )
        .await?;
    Ok(row.map(|r| serde_json::from_value(r.get(0)).unwrap_or_default()))
}

/// Marks a tenant deleted; its keys stop working at once. Returns whether it existed.
pub async fn delete(
    db: &impl GenericClient,
    tenant: &TenantId,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE tenants SET deleted_at = now(), updated_at = now()
             WHERE id = $1 AND deleted_at IS NULL",
            &[&tenant.as_str()],
        )
        .await?;
    caches.forget_tenant();
    Ok(n == 1)
}

/// The private networks a live tenant's endpoints may reach (its own list; the
/// operator-wide one is added by the caller). Empty for an unknown tenant.
pub async fn egress_networks(db: &impl GenericClient, tenant: &TenantId) -> Result<Vec<String>, StoreError> {
    let row = db
        .query_opt(
            "SELECT egress_allow_networks FROM tenants WHERE id = $1 AND deleted_at IS NULL",
            &[&tenant.as_str()],
        )
        .await?;
    Ok(row.map(|r| r.get(0)).unwrap_or_default())
}

impl Tenant {
    /// Whether its endpoints' transformations run: the operator allows them and
    /// the tenant has not turned them off.
    pub fn transforms(&self) -> bool {
        self.transformations && !self.transformations_off
    }
}

/// The tenant's own switch of its transformations; the operator's is in [`update`].
pub async fn set_transformations(
    db: &impl GenericClient,
    tenant: &TenantId,
    on: bool,
) -> Result<Option<Tenant>, StoreError> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE tenants SET transformations_off = NOT $2, updated_at = now()
                 WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}"
            ),
            &[&tenant.as_str(), &on],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}
