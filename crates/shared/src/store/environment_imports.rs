//! One environment import of a tenant at a time: each runs in one transaction
//! holding a pooled connection throughout, so a tenant firing many at once
//! would take the pool from every other.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::TenantId;

/// Takes the tenant's import lock for the caller's transaction; `false` if
/// another import of the tenant holds it.
pub async fn begin(db: &impl GenericClient, tenant: &TenantId) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('hookgate-environment-import:' || $1, 0))",
            &[&tenant.as_str()],
        )
        .await?;
    Ok(row.get(0))
}
