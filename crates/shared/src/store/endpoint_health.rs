//! Each HTTP endpoint's health at a glance, for the portal's first screen: failing
//! since when, its last success, its next attempt, how many of its last 100
//! attempts of the last 7 days failed, and (while it fails) what its last failure
//! answered. Attempts are read by the endpoint's index within a window of attempt
//! ids (the failure since it began failing, the rate over 7 days), so an endpoint's
//! long history is never walked; the cost grows with the attempts' partitions.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{AppId, EndpointId, TenantId};
use crate::status::{DeliveryStatus, EndpointKind};

/// How many of an endpoint's latest attempts the failure rate is taken over.
pub const RECENT: i64 = 100;
/// How much of a failure's answer is shown.
const SHOWN: i32 = 500;

/// One endpoint's health.
#[derive(Debug, Clone)]
pub struct Health {
    pub endpoint_id: EndpointId,
    pub disabled: bool,
    /// The first failure since its last success, while it fails.
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    /// When its next delivery is due (a retry, while it fails).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Of its latest [`RECENT`] attempts: how many, how many failed.
    pub recent: i64,
    pub recent_failed: i64,
    /// While it fails: its latest failed attempt's time, HTTP status (0: none) and answer.
    pub last_failure: Option<(DateTime<Utc>, i16, String)>,
}

/// The health of the application's HTTP endpoints (at most 250, newest first, as
/// the endpoint list shows them), or of the one `only` names.
pub async fn for_app(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    only: Option<&EndpointId>,
) -> Result<Vec<Health>, StoreError> {
    let rows = db
        .query(
            "SELECT e.id, e.disabled, e.failing_since, e.last_success_at,
                    (SELECT d.next_attempt_at FROM deliveries d
                      WHERE d.tenant_id = e.tenant_id AND d.app_id = e.app_id AND d.endpoint_id = e.id
                        AND d.status IN (1, 3) AND d.next_attempt_at IS NOT NULL
                      ORDER BY d.next_attempt_at LIMIT 1) AS next_attempt_at,
                    r.n, r.failed, f.created_at, f.response_status_code, left(f.response, $6) AS failure_response
             FROM endpoints e
             CROSS JOIN LATERAL (
                SELECT count(*) AS n, count(*) FILTER (WHERE a.status <> $3) AS failed FROM (
                    SELECT status FROM attempts a
                    WHERE a.tenant_id = e.tenant_id AND a.app_id = e.app_id AND a.endpoint_id = e.id
                      AND a.id >= hookgate_id_floor('atmpt', now() - interval '7 days')
                    ORDER BY a.id DESC LIMIT $5) a) r
             LEFT JOIN LATERAL (
                SELECT a.created_at, a.response_status_code, a.response FROM attempts a
                WHERE e.failing_since IS NOT NULL
                  AND a.tenant_id = e.tenant_id AND a.app_id = e.app_id AND a.endpoint_id = e.id AND a.status <> $3
                  AND a.id >= hookgate_id_floor('atmpt', e.failing_since - interval '1 minute')
                ORDER BY a.id DESC LIMIT 1) f ON true
             WHERE e.tenant_id = $1 AND e.app_id = $2 AND e.kind = $4 AND ($7::text IS NULL OR e.id = $7)
             ORDER BY e.id DESC LIMIT 250",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &DeliveryStatus::Success.code(),
                &EndpointKind::Http.code(),
                &RECENT,
                &SHOWN,
                &only.map(|e| e.as_str()),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Health {
            endpoint_id: EndpointId::from_db(r.get("id")),
            disabled: r.get("disabled"),
            failing_since: r.get("failing_since"),
            last_success_at: r.get("last_success_at"),
            next_attempt_at: r.get("next_attempt_at"),
            recent: r.get("n"),
            recent_failed: r.get("failed"),
            last_failure: r.get::<_, Option<DateTime<Utc>>>("created_at").map(|at| {
                (at, r.get("response_status_code"), r.get::<_, Option<String>>("failure_response").unwrap_or_default())
            }),
        })
        .collect())
}
