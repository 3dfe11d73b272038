//! Tenant-wide counts Svix answers as statistics: applications with an active
//! endpoint, and active and disabled endpoints.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::TenantId;

/// Applications of the tenant with at least one enabled endpoint (of any kind).
pub async fn active_apps(db: &impl GenericClient, tenant: &TenantId) -> Result<i64, StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) FROM applications a WHERE a.tenant_id = $1 AND NOT a.operational
               AND EXISTS (SELECT 1 FROM endpoints e WHERE e.tenant_id = a.tenant_id AND e.app_id = a.id AND NOT e.disabled)",
            &[&tenant.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

/// The tenant's endpoints (of its own applications, not its operational ones):
/// how many are enabled and how many disabled.
pub async fn endpoints(db: &impl GenericClient, tenant: &TenantId) -> Result<(i64, i64), StoreError> {
    let row = db
        .query_one(
            "SELECT count(*) FILTER (WHERE NOT e.disabled) AS enabled_count,
                    count(*) FILTER (WHERE e.disabled) AS disabled_count
             FROM endpoints e JOIN applications a ON a.tenant_id = e.tenant_id AND a.id = e.app_id
             WHERE e.tenant_id = $1 AND NOT a.operational",
            &[&tenant.as_str()],
        )
        .await?;
    Ok((row.get("enabled_count"), row.get("disabled_count")))
}
