//! An event type's own retry schedule: the delays its messages' deliveries wait
//! between attempts, in place of the operator's default.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::TenantId;

/// The schedule of the tenant's event type `name`, in milliseconds: `None` when
/// there is no such type, `Some(None)` when it keeps the default.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
) -> Result<Option<Option<Vec<i64>>>, StoreError> {
    let row = db
        .query_opt(
            "SELECT retry_schedule_ms FROM event_types WHERE tenant_id = $1 AND name = $2",
            &[&tenant.as_str(), &name],
        )
        .await?;
    // A NULL inside the array (only SQL written by hand makes one) is left out.
    Ok(row.map(|r| {
        let ms: Option<Vec<Option<i64>>> = r.get(0);
        ms.map(|v| v.into_iter().flatten().collect())
    }))
}

/// Sets (or, with `None`, clears) the schedule; false when there is no such type.
pub async fn set(
    db: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
    schedule_ms: Option<&[i64]>,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE event_types SET retry_schedule_ms = $3, updated_at = now() WHERE tenant_id = $1 AND name = $2",
            &[&tenant.as_str(), &name, &schedule_ms],
        )
        .await?;
    Ok(n == 1)
}
