//! The alert outbox (`alert_outbox`): what `store::alerts` queued, claimed by
//! the senders (fairly: a few rows per tenant per claim), settled once sent or
//! given up, fenced by the claim; and the marks' pruning.

use serde_json::Value;
use tokio_postgres::GenericClient;

use super::{
    alerts::{Condition, Target},
    StoreError,
};
use crate::ids::{AppId, TenantId};

/// Rows one claim takes of one tenant at most: one tenant's backlog (a slow
/// chat webhook) does not hold back another's alerts.
const PER_TENANT: i64 = 5;

/// One queued alert, claimed by a sender.
#[derive(Debug, Clone)]
pub struct Queued {
    pub id: i64,
    pub tenant: TenantId,
    pub target: Target,
    pub condition: Condition,
    pub app: Option<AppId>,
    pub detail: Value,
    pub held: i32,
    /// Tries so far, this one included.
    pub attempts: i16,
}

/// Claims up to `limit` due alerts, of every tenant, for `lease_secs` under
/// `claim`: another sender takes them only once the lease has passed.
pub async fn claim(
    db: &impl GenericClient,
    claim: i64,
    lease_secs: f64,
    limit: i64,
) -> Result<Vec<Queued>, StoreError> {
    // Only rows this release can read: one a newer release wrote is left to it.
    let targets: Vec<&str> = Target::ALL.iter().map(|t| t.as_str()).collect();
    let conditions: Vec<&str> = Condition::ALL.iter().map(|c| c.as_str()).collect();
    let rows = db
        .query(
            &format!(
                "UPDATE alert_outbox o SET claim = $1, claimed_until = now() + make_interval(secs => $2),
                    attempts = o.attempts + 1
                 WHERE (o.tenant_id, o.id) IN (
                    SELECT tenant_id, id FROM alert_outbox WHERE (tenant_id, id) IN (
                        SELECT tenant_id, id FROM (
                            SELECT tenant_id, id, due_at,
                                   row_number() OVER (PARTITION BY tenant_id ORDER BY due_at) AS n
                            FROM alert_outbox
                            WHERE due_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                              AND target = ANY ($4) AND condition = ANY ($5)
                        ) c WHERE n <= {PER_TENANT} ORDER BY due_at LIMIT $3)
                    -- Again where the row is locked: a row another sender claimed (or
                    -- put back for later) since this statement's snapshot is re-read
                    -- here, and passed by.
                    AND due_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                    FOR UPDATE SKIP LOCKED)
                 RETURNING o.id, o.tenant_id, o.target, o.condition, o.app_id, o.detail, o.held, o.attempts"
            ),
            &[&claim, &lease_secs, &limit, &targets, &conditions],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some(Queued {
                id: r.get("id"),
                tenant: TenantId::from_db(r.get("tenant_id")),
                target: Target::parse(r.get("target"))?,
                condition: Condition::parse(r.get("condition"))?,
                app: r.get::<_, Option<String>>("app_id").map(AppId::from_db),
                detail: r.get("detail"),
                held: r.get("held"),
                attempts: r.get("attempts"),
            })
        })
        .collect())
}

/// Deletes a claimed alert (sent, or given up), if `claim` still holds it.
pub async fn done(db: &impl GenericClient, tenant: &TenantId, id: i64, claim: i64) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "DELETE FROM alert_outbox WHERE tenant_id = $1 AND id = $2 AND claim = $3",
            &[&tenant.as_str(), &id, &claim],
        )
        .await?;
    Ok(n == 1)
}

/// Puts a claimed alert back, due again in `after_secs`, if `claim` still holds it.
pub async fn retry(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: i64,
    claim: i64,
    after_secs: f64,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE alert_outbox SET claim = NULL, claimed_until = NULL,
                due_at = now() + make_interval(secs => $4)
             WHERE tenant_id = $1 AND id = $2 AND claim = $3",
            &[&tenant.as_str(), &id, &claim, &after_secs],
        )
        .await?;
    Ok(n == 1)
}

/// Forgets marks older than a week (no window is longer), of every tenant.
pub async fn prune_marks(db: &impl GenericClient) -> Result<u64, StoreError> {
    Ok(db.execute("DELETE FROM alert_marks WHERE sent_at < now() - interval '8 days'", &[]).await?)
}

/// An application's `alert-email` addresses, if it still has them.
pub async fn app_email(db: &impl GenericClient, tenant: &TenantId, app: &AppId) -> Result<Option<String>, StoreError> {
    let row = db
        .query_opt(
            "SELECT alert_email FROM applications WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &app.as_str()],
        )
        .await?;
    Ok(row.and_then(|r| r.get("alert_email")))
}
