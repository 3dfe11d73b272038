//! The `tenant_portals` table: how a tenant's customer portal looks and which
//! origins may frame it. Validated at the edge; stored as one JSON document.

use serde::{Deserialize, Serialize};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::TenantId;

/// The portal's colour scheme; `auto` follows the viewer's system setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = PortalTheme)]
pub enum Theme {
    #[default]
    Auto,
    Light,
    Dark,
}

/// A tenant's portal branding; every field optional, defaults are Hookgate's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortalSettings {
    pub display_name: Option<String>,
    /// An `https` (or loopback `http`) image URL.
    pub logo_url: Option<String>,
    /// `#rrggbb`.
    pub primary_color: Option<String>,
    #[serde(default)]
    pub theme: Theme,
    /// Origins allowed to frame the portal (`frame-ancestors`); none by default.
    #[serde(default)]
    pub frame_ancestors: Vec<String>,
    /// Whether a managing portal link is shown the values of the endpoints'
    /// custom headers (any may be a credential): off by default; a read-only
    /// link never is.
    #[serde(default)]
    pub show_header_values: bool,
}

/// The tenant's settings, or the defaults if it never set any.
pub async fn get(db: &impl GenericClient, tenant: &TenantId) -> Result<PortalSettings, StoreError> {
    let row = db.query_opt("SELECT settings FROM tenant_portals WHERE tenant_id = $1", &[&tenant.as_str()]).await?;
    Ok(row.and_then(|r| serde_json::from_value(r.get(0)).ok()).unwrap_or_default())
}

/// Replaces the tenant's settings. `false` if there is no such live tenant.
pub async fn put(db: &impl GenericClient, tenant: &TenantId, settings: &PortalSettings) -> Result<bool, StoreError> {
    let value = serde_json::to_value(settings).expect("settings serialise");
    let n = db
        .execute(
            "INSERT INTO tenant_portals (tenant_id, settings)
             SELECT id, $2 FROM tenants WHERE id = $1 AND deleted_at IS NULL
             ON CONFLICT (tenant_id) DO UPDATE SET settings = EXCLUDED.settings, updated_at = now()",
            &[&tenant.as_str(), &value],
        )
        .await?;
    Ok(n == 1)
}
