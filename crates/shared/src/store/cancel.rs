//! Svix's `cancel-msgs`: an endpoint's pending deliveries of messages made before
//! a time end canceled (status 4), a bounded batch per statement.
//!
//! Fenced on the lease: a delivery a worker holds (`lease_token` set) is being
//! sent and is left alone, so its result (a success, say) is written as usual and
//! never overwritten by the cancel. Only rows at rest, waiting for their first
//! try or their next retry, are canceled.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{AppId, EndpointId, TenantId};
use crate::status::DeliveryStatus;

/// What one batch did.
#[derive(Debug, Clone, Default)]
pub struct Canceled {
    /// Rows the batch looked at (at most its limit: fewer means the last batch).
    pub picked: i64,
    /// Of those, the rows it canceled (one taken by a worker meanwhile is not).
    pub canceled: i64,
    /// The last message id looked at: the next batch starts after it.
    pub last: Option<String>,
}

/// Cancels up to `limit` pending deliveries to the endpoint of messages with ids
/// in `(after, before)`, in message id order (the `deliveries_by_endpoint` index).
/// `before` is the id floor of the request's `createdBefore`.
pub async fn cancel_batch(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    (after, before): (&str, &str),
    limit: i64,
) -> Result<Canceled, StoreError> {
    let row = db
        .query_one(
            "WITH picked AS (
                SELECT msg_id FROM deliveries
                WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND msg_id > $4 AND msg_id < $5
                  AND status = 1 AND lease_token IS NULL
                ORDER BY msg_id LIMIT $6
             ), canceled AS (
                -- Checked again on the row itself: a worker that claimed it since
                -- the pick holds its lease, and the row is left to that worker.
                UPDATE deliveries d SET status = $7, next_attempt_at = NULL
                FROM picked p
                WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.endpoint_id = $3 AND d.msg_id = p.msg_id
                  AND d.status = 1 AND d.lease_token IS NULL
                RETURNING d.msg_id
             )
             SELECT (SELECT count(*) FROM picked) AS picked_count, (SELECT count(*) FROM canceled) AS canceled_count,
                 (SELECT max(msg_id) FROM picked) AS last_msg_id",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &endpoint.as_str(),
                &after,
                &before,
                &limit,
                &DeliveryStatus::Canceled.code(),
            ],
        )
        .await?;
    Ok(Canceled { picked: row.get("picked_count"), canceled: row.get("canceled_count"), last: row.get("last_msg_id") })
}
