//! The `endpoint_transformations` table: an endpoint's JavaScript transformation,
//! its switch and its variables (sealed), and the endpoint's `transformation_at`
//! that tells the workers it has one in force.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{AppId, EndpointId, TenantId};

/// A stored transformation; variables as sealed.
#[derive(Debug, Clone)]
pub struct Transformation {
    pub code: String,
    pub enabled: bool,
    pub variables: Option<Vec<u8>>,
    pub updated_at: DateTime<Utc>,
}

pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
) -> Result<Option<Transformation>, StoreError> {
    let row = db
        .query_opt(
            "SELECT code, enabled, variables, updated_at FROM endpoint_transformations
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str()],
        )
        .await?;
    Ok(row.map(|r| Transformation {
        code: r.get("code"),
        enabled: r.get("enabled"),
        variables: r.get("variables"),
        updated_at: r.get("updated_at"),
    }))
}

/// Writes the endpoint's transformation whole, and in the same statement its
/// `transformation_at` (the new time when enabled with code, else NULL).
pub async fn set(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    code: &str,
    enabled: bool,
    variables: Option<&[u8]>,
) -> Result<Transformation, StoreError> {
    let row = db
        .query_one(
            "WITH t AS (
                INSERT INTO endpoint_transformations (tenant_id, app_id, endpoint_id, code, enabled, variables, updated_at)
                VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
                ON CONFLICT (tenant_id, app_id, endpoint_id) DO UPDATE
                    SET code = $4, enabled = $5, variables = $6, updated_at = clock_timestamp()
                RETURNING code, enabled, variables, updated_at
             ), e AS (
                UPDATE endpoints SET transformation_at = CASE WHEN t.enabled AND t.code <> '' THEN t.updated_at END
                FROM t WHERE tenant_id = $1 AND app_id = $2 AND id = $3
             )
             SELECT code, enabled, variables, updated_at FROM t",
            &[&tenant.as_str(), &app.as_str(), &endpoint.as_str(), &code, &enabled, &variables],
        )
        .await?;
    Ok(Transformation {
        code: row.get("code"),
        enabled: row.get("enabled"),
        variables: row.get("variables"),
        updated_at: row.get("updated_at"),
    })
}
