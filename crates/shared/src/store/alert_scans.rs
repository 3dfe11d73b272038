//! The alert conditions found by looking rather than told by an event: endpoints
//! failing for a while, and broker sources that have read nothing but errors
//! for a while. The workers' alert loop scans for them; each found is raised in
//! a transaction of its own tenant's.

use serde_json::json;
use tokio_postgres::GenericClient;

use super::{
    alert_settings::{self, FAILING_SECS, WINDOW_SECS},
    alerts::{mark_and_queue, Condition, Queue, Side},
    tenants::OPERATOR,
    StoreError,
};
use crate::ids::{AppId, BrokerSourceId, TenantId};

/// Whether someone on either side is told of `condition` about the row `r`
/// (whose id is the subject) and that side was not told of it since `since`
/// nor within its window: the scans' test, as `raise_one` and `raise_stalled`
/// decide (the same targets, events, marks and windows). Expects the tenant's
/// settings as `s` and the operator's as `op`; `also_told`: one more way the
/// tenant's side has a target (an application's addresses).
fn someone_untold(condition: Condition, r: &str, since: &str, also_told: &str) -> String {
    let c = condition.as_str();
    let tells = |s: &str| format!("({s}.events IS NULL OR '{c}' = ANY ({s}.events))");
    let untold = |side: Side, window: &str| {
        format!(
            "NOT EXISTS (SELECT 1 FROM alert_marks k
                WHERE k.tenant_id = {r}.tenant_id AND k.condition = '{mark}' AND k.subject = {r}.id
                  AND (k.sent_at >= {since} OR k.sent_at > now() - make_interval(secs => {window})))",
            mark = side.mark(condition)
        )
    };
    format!(
        "((((s.email IS NOT NULL OR s.chat_url_sealed IS NOT NULL) {also_told}) AND {} AND {})
          OR ((op.email IS NOT NULL OR op.chat_url_sealed IS NOT NULL) AND {} AND {}))",
        tells("s"),
        untold(Side::Tenant, &format!("COALESCE(s.window_secs, op.window_secs, {WINDOW_SECS})")),
        tells("op"),
        untold(Side::Operator, &format!("COALESCE(op.window_secs, {WINDOW_SECS})")),
    )
}

/// Endpoints (of every tenant) failing since longer than their tenant's
/// `failingMinutes`, not disabled, where someone is told of `endpoint.failing`
/// and that side has not been told of it since the endpoint began failing nor
/// within its window: at most `limit`, the longest failing first.
pub async fn failing(db: &impl GenericClient, limit: i64) -> Result<Vec<(TenantId, AppId, String)>, StoreError> {
    let sql = format!(
        "WITH op AS (SELECT * FROM alert_settings WHERE tenant_id = '{OPERATOR}')
         SELECT e.tenant_id, e.app_id, e.id FROM endpoints e
         JOIN applications a ON a.tenant_id = e.tenant_id AND a.id = e.app_id AND NOT a.operational
         JOIN tenants t ON t.id = e.tenant_id AND t.deleted_at IS NULL AND NOT t.disabled
         LEFT JOIN alert_settings s ON s.tenant_id = e.tenant_id
         LEFT JOIN op ON e.tenant_id <> '{OPERATOR}'
         WHERE e.failing_since IS NOT NULL AND NOT e.disabled
           AND e.failing_since <= now() - make_interval(secs => COALESCE(s.failing_secs, op.failing_secs, {FAILING_SECS}))
           AND {told}
         ORDER BY e.failing_since LIMIT $1",
        told = someone_untold(Condition::EndpointFailing, "e", "e.failing_since", "OR a.alert_email IS NOT NULL"),
    );
    let rows = db.query(&sql, &[&limit]).await?;
    Ok(rows
        .iter()
        .map(|r| (TenantId::from_db(r.get("tenant_id")), AppId::from_db(r.get("app_id")), r.get("id")))
        .collect())
}

/// Broker sources (of every tenant) that are enabled, of an enabled tenant, and
/// have met an error and read nothing since longer than the tenant's
/// `failingMinutes`, where someone is told of `source.stalled` and that side was
/// not told since the source last read (or was made) nor within its window.
pub async fn stalled(db: &impl GenericClient, limit: i64) -> Result<Vec<(TenantId, BrokerSourceId)>, StoreError> {
    let sql = format!(
        "WITH op AS (SELECT * FROM alert_settings WHERE tenant_id = '{OPERATOR}')
         SELECT b.tenant_id, b.id FROM broker_sources b
         JOIN tenants t ON t.id = b.tenant_id AND t.deleted_at IS NULL AND NOT t.disabled
         LEFT JOIN alert_settings s ON s.tenant_id = b.tenant_id
         LEFT JOIN op ON b.tenant_id <> '{OPERATOR}'
         WHERE NOT b.disabled AND b.last_error IS NOT NULL
           AND COALESCE(b.last_read_at, b.created_at)
               <= now() - make_interval(secs => COALESCE(s.failing_secs, op.failing_secs, {FAILING_SECS}))
           AND {told}
         ORDER BY b.last_read_at NULLS FIRST LIMIT $1",
        // A source has no application's addresses.
        told = someone_untold(Condition::SourceStalled, "b", "COALESCE(b.last_read_at, b.created_at)", ""),
    );
    let rows = db.query(&sql, &[&limit]).await?;
    Ok(rows.iter().map(|r| (TenantId::from_db(r.get("tenant_id")), BrokerSourceId::from_db(r.get("id")))).collect())
}

/// Raises `source.stalled` about `source`, on each side that has targets, if it
/// is still stalled (enabled, with an error).
pub async fn raise_stalled(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &BrokerSourceId,
) -> Result<u64, StoreError> {
    let about = db
        .query_opt(
            "SELECT name, kind, app_id, last_error, last_read_at, created_at FROM broker_sources
             WHERE tenant_id = $1 AND id = $2 AND NOT disabled AND last_error IS NOT NULL",
            &[&tenant.as_str(), &source.as_str()],
        )
        .await?;
    let Some(about) = about else { return Ok(0) };
    let (own, op) = alert_settings::with_operator(db, tenant).await?;
    let op = op.filter(|_| tenant.as_str() != OPERATOR);
    let app: Option<String> = about.get("app_id");
    let last_read: Option<chrono::DateTime<chrono::Utc>> = about.get("last_read_at");
    let detail = json!({
        "tenantId": tenant.as_str(),
        "sourceId": source.as_str(),
        "sourceName": about.get::<_, String>("name"),
        "sourceType": about.get::<_, String>("kind"),
        "lastError": about.get::<_, Option<String>>("last_error"),
        "lastReadAt": last_read,
        "since": last_read.unwrap_or(about.get("created_at")),
    });
    let mut made = 0;
    for side in [Side::Tenant, Side::Operator] {
        // A source has no application's addresses to tell.
        let to = side.targets(Condition::SourceStalled, false, own.as_ref(), op.as_ref());
        if to.is_empty() {
            continue;
        }
        let mark = side.mark(Condition::SourceStalled);
        let q = Queue {
            tenant: tenant.as_str(),
            mark: &mark,
            condition: Condition::SourceStalled,
            subject: source.as_str(),
            app: app.as_deref(),
        };
        made += mark_and_queue(db, &q, side.window_secs(own.as_ref(), op.as_ref()), 0, detail.clone(), &to).await?;
    }
    Ok(made)
}
