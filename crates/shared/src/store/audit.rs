//! The `audit_log` table: who changed what of a tenant, and when, kept as long as
//! the tenant's messages.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{AuditId, TenantId};

/// The longest path kept: the rest is cut (no route of Hookgate's is longer).
pub const PATH_CHARS: usize = 512;

/// One action: what the request was and what it answered.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: AuditId,
    pub actor: String,
    /// The label of the API key that acted, where a key did and has one.
    pub actor_label: Option<String>,
    pub method: String,
    pub path: String,
    pub status_code: i16,
    pub request_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Records one action.
pub async fn record(
    db: &impl GenericClient,
    tenant: &TenantId,
    actor: &str,
    method: &str,
    path: &str,
    status_code: u16,
    request_id: Option<&str>,
) -> Result<(), StoreError> {
    let path: String = path.chars().take(PATH_CHARS).collect();
    let status = i16::try_from(status_code).unwrap_or(i16::MAX);
    db.execute(
        "INSERT INTO audit_log (tenant_id, id, actor, method, path, status_code, request_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&tenant.as_str(), &AuditId::generate().as_str(), &actor, &method, &path, &status, &request_id],
    )
    .await?;
    Ok(())
}

/// A page of the tenant's log, newest first unless asked otherwise.
pub async fn list(db: &impl GenericClient, tenant: &TenantId, page: &PageRequest) -> Result<Page<Entry>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    // The label is read now, so a key labelled after it acted is named too.
    let sql = format!(
        "SELECT a.id, a.actor, k.label, a.method, a.path, a.status_code, a.request_id, a.created_at
         FROM audit_log a
         LEFT JOIN api_keys k ON k.tenant_id = a.tenant_id AND a.actor LIKE 'key:%' AND k.id = substr(a.actor, 5)
         WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.id {cmp} $2)
         ORDER BY a.id {dir} LIMIT $3"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &key, &page.fetch_limit()]).await?;
    let entries = rows
        .iter()
        .map(|r| Entry {
            id: AuditId::from_db(r.get("id")),
            actor: r.get("actor"),
            actor_label: r.get("label"),
            method: r.get("method"),
            path: r.get("path"),
            status_code: r.get("status_code"),
            request_id: r.get("request_id"),
            created_at: r.get("created_at"),
        })
        .collect();
    Ok(Page::from_rows(entries, page, |e| e.id.to_string()))
}

/// Removes up to `limit` entries past their tenant's message retention (else
/// `default_days`), each tenant's oldest first through the primary key.
pub async fn prune(db: &impl GenericClient, default_days: i32, limit: i64) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "DELETE FROM audit_log a USING (
                SELECT x.tenant_id, x.id FROM tenants t
                CROSS JOIN LATERAL (
                    SELECT l.tenant_id, l.id FROM audit_log l
                    WHERE l.tenant_id = t.id
                      AND l.id < hookgate_id_floor('aud', now() - make_interval(days => COALESCE(t.message_days, $1)))
                    ORDER BY l.id LIMIT $2) x
                LIMIT $2) doomed
             WHERE a.tenant_id = doomed.tenant_id AND a.id = doomed.id",
            &[&default_days, &limit],
        )
        .await?)
}
