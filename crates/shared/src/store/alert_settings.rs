//! Who is told of alerts: a tenant's addresses, chat webhook, conditions and
//! timings (`alert_settings`); the operator's row, under its own tenant id, is
//! told of every tenant and gives the timings a tenant leaves unset.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{tenants::OPERATOR, StoreError};
use crate::ids::TenantId;

/// How long an endpoint fails before it is told, where no one set it: 15 minutes.
pub const FAILING_SECS: i32 = 15 * 60;
/// One alert per condition and subject in this long, where no one set it: an hour.
pub const WINDOW_SECS: i32 = 60 * 60;

/// A tenant's (or the operator's) alert settings as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertSettings {
    /// Comma-separated addresses.
    pub email: Option<String>,
    /// The chat webhook's URL, sealed with the tenant's key.
    pub chat_url_sealed: Option<Vec<u8>>,
    /// The conditions told; `None`: all.
    pub events: Option<Vec<String>>,
    pub failing_secs: Option<i32>,
    pub window_secs: Option<i32>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl AlertSettings {
    /// Whether `condition` is told to these settings' targets.
    pub fn tells(&self, condition: &str) -> bool {
        self.events.as_ref().is_none_or(|e| e.iter().any(|c| c == condition))
    }
}

/// A change to the settings: `None` leaves a field alone, `Some(None)` clears it.
#[derive(Debug, Default)]
pub struct SettingsPatch {
    pub email: Option<Option<String>>,
    pub chat_url_sealed: Option<Option<Vec<u8>>>,
    pub events: Option<Option<Vec<String>>>,
    pub failing_secs: Option<Option<i32>>,
    pub window_secs: Option<Option<i32>>,
}

/// The operator's tenant id: its row is told of every tenant.
pub fn operator() -> TenantId {
    TenantId::from_db(OPERATOR.to_owned())
}

/// The tenant's settings and the operator's (the second `None` for the operator
/// itself), read in one statement.
pub async fn with_operator(
    db: &impl GenericClient,
    tenant: &TenantId,
) -> Result<(Option<AlertSettings>, Option<AlertSettings>), StoreError> {
    let mut of = of_tenants(db, &[tenant.as_str(), OPERATOR]).await?;
    let own = of.remove(tenant.as_str());
    Ok((own, of.remove(OPERATOR)))
}

/// The settings of each of `tenants` that has some, by tenant id: one read for
/// a batch of notices (`store::alerts`).
pub(super) async fn of_tenants(
    db: &impl GenericClient,
    tenants: &[&str],
) -> Result<std::collections::HashMap<String, AlertSettings>, StoreError> {
    let rows = db
        .query(
            "SELECT tenant_id, email, chat_url_sealed, events, failing_secs, window_secs, updated_at
             FROM alert_settings WHERE tenant_id = ANY ($1)",
            &[&tenants],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get("tenant_id"), from_row(r))).collect())
}

/// A row of `alert_settings` (its columns named as stored).
fn from_row(r: &tokio_postgres::Row) -> AlertSettings {
    AlertSettings {
        email: r.get("email"),
        chat_url_sealed: r.get("chat_url_sealed"),
        events: r.get("events"),
        failing_secs: r.get("failing_secs"),
        window_secs: r.get("window_secs"),
        updated_at: Some(r.get("updated_at")),
    }
}

/// The tenant's own settings (all unset if it has none).
pub async fn get(db: &impl GenericClient, tenant: &TenantId) -> Result<AlertSettings, StoreError> {
    Ok(with_operator(db, tenant).await?.0.unwrap_or_default())
}

/// Applies `patch` to the tenant's settings (made if it has none) and returns them.
pub async fn patch(db: &impl GenericClient, tenant: &TenantId, p: &SettingsPatch) -> Result<AlertSettings, StoreError> {
    // One statement: a flag per field says whether to take the given value.
    let row = db
        .query_one(
            "INSERT INTO alert_settings AS s (tenant_id, email, chat_url_sealed, events, failing_secs, window_secs)
             VALUES ($1, $3, $5, $7, $9, $11)
             ON CONFLICT (tenant_id) DO UPDATE SET
                email = CASE WHEN $2 THEN $3 ELSE s.email END,
                chat_url_sealed = CASE WHEN $4 THEN $5 ELSE s.chat_url_sealed END,
                events = CASE WHEN $6 THEN $7 ELSE s.events END,
                failing_secs = CASE WHEN $8 THEN $9 ELSE s.failing_secs END,
                window_secs = CASE WHEN $10 THEN $11 ELSE s.window_secs END,
                updated_at = now()
             RETURNING email, chat_url_sealed, events, failing_secs, window_secs, updated_at",
            &[
                &tenant.as_str(),
                &p.email.is_some(),
                &p.email.clone().flatten(),
                &p.chat_url_sealed.is_some(),
                &p.chat_url_sealed.clone().flatten(),
                &p.events.is_some(),
                &p.events.clone().flatten(),
                &p.failing_secs.is_some(),
                &p.failing_secs.flatten(),
                &p.window_secs.is_some(),
                &p.window_secs.flatten(),
            ],
        )
        .await?;
    Ok(AlertSettings {
        email: row.get("email"),
        chat_url_sealed: row.get("chat_url_sealed"),
        events: row.get("events"),
        failing_secs: row.get("failing_secs"),
        window_secs: row.get("window_secs"),
        updated_at: Some(row.get("updated_at")),
    })
}

/// The purpose a chat webhook URL is sealed under (bound as associated data).
pub fn chat_purpose(tenant: &TenantId) -> String {
    format!("alert-chat-url:{tenant}")
}
