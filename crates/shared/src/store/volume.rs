//! A tenant's last day at a glance, for the operator's console: volume both
//! ways, failures and the delivery backlog.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::{ids::TenantId, status::DeliveryStatus};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Volume {
    pub messages: i64,
    pub inbound: i64,
    /// Copies of inbound events caught as duplicates.
    pub duplicates: i64,
    pub attempts: i64,
    pub failed_attempts: i64,
    /// Deliveries waiting to be sent (pending or being sent).
    pub pending: i64,
    /// When the oldest of them was created.
    pub oldest_pending: Option<DateTime<Utc>>,
}

/// The tenant's volume since `since` (and its backlog now). The time bounds are
/// id floors too, so each count reads the partitions of the window only.
pub async fn since(db: &impl GenericClient, tenant: &TenantId, since: DateTime<Utc>) -> Result<Volume, StoreError> {
    let row = db
        .query_one(
            "SELECT
               (SELECT count(*) FROM messages WHERE tenant_id = $1 AND id >= hookgate_id_floor('msg', $2)) AS messages,
               (SELECT count(*) FROM inbound_events WHERE tenant_id = $1 AND id >= hookgate_id_floor('evt', $2))
                 AS inbound,
               (SELECT coalesce(sum(duplicates), 0)::bigint FROM inbound_events
                 WHERE tenant_id = $1 AND id >= hookgate_id_floor('evt', $2)) AS duplicates,
               (SELECT count(*) FROM attempts WHERE tenant_id = $1 AND id >= hookgate_id_floor('atmpt', $2))
                 AS attempts,
               (SELECT count(*) FROM attempts WHERE tenant_id = $1 AND id >= hookgate_id_floor('atmpt', $2)
                  AND status <> $3) AS failed_attempts,
               (SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND status IN (1, 3)) AS pending,
               (SELECT min(created_at) FROM deliveries WHERE tenant_id = $1 AND status IN (1, 3)) AS oldest_pending",
            &[&tenant.as_str(), &since, &DeliveryStatus::Success.code()],
        )
        .await?;
    Ok(Volume {
        messages: row.get("messages"),
        inbound: row.get("inbound"),
        duplicates: row.get("duplicates"),
        attempts: row.get("attempts"),
        failed_attempts: row.get("failed_attempts"),
        pending: row.get("pending"),
        oldest_pending: row.get("oldest_pending"),
    })
}
