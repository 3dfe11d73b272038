//! Alerts for people: raising one (debounced per condition and subject by
//! `alert_marks`, written to `alert_outbox` once per target in the caller's
//! transaction), finding endpoints failing long enough, and the sender's claim
//! of what is due. The sender (egress's `alerts`) reads the address when
//! it sends, so a cleared setting stops what is queued.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio_postgres::GenericClient;

use super::{
    alert_settings::{self, AlertSettings, FAILING_SECS, WINDOW_SECS},
    operational::Notice,
    tenants::OPERATOR,
    StoreError,
};
use crate::ids::{AppId, TenantId};

/// The conditions a person is told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Condition {
    /// Disabled automatically after failing (not by a person).
    EndpointDisabled,
    /// Failing without a success for the tenant's `failingMinutes`.
    EndpointFailing,
    /// A message's last scheduled attempt failed.
    AttemptExhausted,
}

impl Condition {
    pub const ALL: [Condition; 3] =
        [Condition::EndpointDisabled, Condition::EndpointFailing, Condition::AttemptExhausted];

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::EndpointDisabled => "endpoint.disabled",
            Condition::EndpointFailing => "endpoint.failing",
            Condition::AttemptExhausted => "message.attempt.exhausted",
        }
    }

    pub fn parse(s: &str) -> Option<Condition> {
        Condition::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// Where one alert goes; the address is read from the settings when it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The application's `alert-email` addresses.
    AppEmail,
    TenantEmail,
    TenantChat,
    OperatorEmail,
    OperatorChat,
}

impl Target {
    const ALL: [Target; 5] =
        [Target::AppEmail, Target::TenantEmail, Target::TenantChat, Target::OperatorEmail, Target::OperatorChat];

    pub fn as_str(self) -> &'static str {
        match self {
            Target::AppEmail => "app-email",
            Target::TenantEmail => "tenant-email",
            Target::TenantChat => "tenant-chat",
            Target::OperatorEmail => "operator-email",
            Target::OperatorChat => "operator-chat",
        }
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn is_chat(self) -> bool {
        matches!(self, Target::TenantChat | Target::OperatorChat)
    }

    pub fn is_operator(self) -> bool {
        matches!(self, Target::OperatorEmail | Target::OperatorChat)
    }
}

/// The targets `condition` of an application reaches: its own addresses and the
/// tenant's where the tenant tells that condition, the operator's where it does.
fn targets(
    condition: Condition,
    app_email: bool,
    own: Option<&AlertSettings>,
    op: Option<&AlertSettings>,
) -> Vec<Target> {
    let c = condition.as_str();
    let mut out = Vec::new();
    let tenant_tells = own.is_none_or(|s| s.tells(c));
    if app_email && tenant_tells {
        out.push(Target::AppEmail);
    }
    if let Some(s) = own.filter(|s| s.tells(c)) {
        if s.email.is_some() {
            out.push(Target::TenantEmail);
        }
        if s.chat_url_sealed.is_some() {
            out.push(Target::TenantChat);
        }
    }
    if let Some(s) = op.filter(|s| s.tells(c)) {
        if s.email.is_some() {
            out.push(Target::OperatorEmail);
        }
        if s.chat_url_sealed.is_some() {
            out.push(Target::OperatorChat);
        }
    }
    out
}

/// The debounce window for a tenant: its own, else the operator's, else an hour.
pub fn window_secs(own: Option<&AlertSettings>, op: Option<&AlertSettings>) -> i32 {
    own.and_then(|s| s.window_secs).or(op.and_then(|s| s.window_secs)).unwrap_or(WINDOW_SECS)
}

/// Raises the alerts the notices of one transaction call for: an automatic
/// `endpoint.disabled` and each `message.attempt.exhausted`, grouped by endpoint
/// (a batch exhausting a hundred messages to one endpoint raises one alert, and
/// counts the rest as held). Called by `operational::emit`, in its transaction.
pub async fn raise_notices(db: &impl GenericClient, notices: &[Notice]) -> Result<u64, StoreError> {
    let mut groups: BTreeMap<(&str, &str, Condition, &str), (i32, &Notice)> = BTreeMap::new();
    for n in notices {
        let condition = match n.event_type {
            "endpoint.disabled" if n.trigger == Some("automatic") => Condition::EndpointDisabled,
            "message.attempt.exhausted" => Condition::AttemptExhausted,
            _ => continue,
        };
        let Some(ep) = &n.endpoint_id else { continue };
        let key = (n.tenant_id.as_str(), n.app_id.as_str(), condition, ep.as_str());
        groups.entry(key).or_insert((0, n)).0 += 1;
    }
    let mut raised = 0;
    // In key order: two transactions raising for the same endpoints lock their
    // marks in the same order.
    for ((_, _, condition, endpoint), (count, n)) in groups {
        let extra = json!({
            "msgId": n.msg_id.as_ref().map(|m| m.to_string()),
            "responseStatusCode": n.attempt.as_ref().map(|(_, c)| *c),
        });
        raised += raise(db, &n.tenant_id, &n.app_id, condition, endpoint, extra, count).await?;
    }
    Ok(raised)
}

/// Raises `condition` about `endpoint` (of `app`) `count` times: if no alert of
/// it was sent within the window, one is queued for each target (saying how many
/// were held back since the last), else they are counted as held. Returns the
/// rows queued. Nothing is queued for an operational application's endpoint or
/// where no one is told.
pub async fn raise(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    condition: Condition,
    endpoint: &str,
    extra: Value,
    count: i32,
) -> Result<u64, StoreError> {
    let (own, op) = alert_settings::with_operator(db, tenant).await?;
    let op = op.filter(|_| tenant.as_str() != OPERATOR);
    let about = db
        .query_opt(
            "SELECT a.uid AS app_uid, a.name AS app_name, a.alert_email IS NOT NULL AS app_email,
                    e.uid AS ep_uid, e.url, e.failing_since
             FROM applications a LEFT JOIN endpoints e ON e.tenant_id = a.tenant_id AND e.app_id = a.id AND e.id = $3
             WHERE a.tenant_id = $1 AND a.id = $2 AND NOT a.operational",
            &[&tenant.as_str(), &app.as_str(), &endpoint],
        )
        .await?;
    let Some(about) = about else { return Ok(0) };
    let to = targets(condition, about.get("app_email"), own.as_ref(), op.as_ref());
    if to.is_empty() {
        return Ok(0);
    }
    let window = window_secs(own.as_ref(), op.as_ref());
    let (tenant_s, cond) = (tenant.as_str(), condition.as_str());
    // The mark exists (made long ago if new), then is held for this transaction.
    db.execute(
        "INSERT INTO alert_marks (tenant_id, condition, subject, sent_at) VALUES ($1, $2, $3, '-infinity')
         ON CONFLICT DO NOTHING",
        &[&tenant_s, &cond, &endpoint],
    )
    .await?;
    let mark = db
        .query_one(
            "SELECT sent_at <= now() - make_interval(secs => $4) AS due, held FROM alert_marks
             WHERE tenant_id = $1 AND condition = $2 AND subject = $3 FOR UPDATE",
            &[&tenant_s, &cond, &endpoint, &(window as f64)],
        )
        .await?;
    if !mark.get::<_, bool>("due") {
        db.execute(
            "UPDATE alert_marks SET held = held + $4 WHERE tenant_id = $1 AND condition = $2 AND subject = $3",
            &[&tenant_s, &cond, &endpoint, &count],
        )
        .await?;
        return Ok(0);
    }
    let held = mark.get::<_, i32>("held") + count - 1;
    db.execute(
        "UPDATE alert_marks SET sent_at = now(), held = 0 WHERE tenant_id = $1 AND condition = $2 AND subject = $3",
        &[&tenant_s, &cond, &endpoint],
    )
    .await?;
    let failing_since: Option<DateTime<Utc>> = about.get("failing_since");
    let mut detail = json!({
        "tenantId": tenant_s,
        "appId": app.as_str(),
        "appUid": about.get::<_, Option<String>>("app_uid"),
        "appName": about.get::<_, String>("app_name"),
        "endpointId": endpoint,
        "endpointUid": about.get::<_, Option<String>>("ep_uid"),
        "url": about.get::<_, Option<String>>("url"),
        "failingSince": failing_since,
    });
    if let (Some(d), Value::Object(more)) = (detail.as_object_mut(), extra) {
        d.extend(more.into_iter().filter(|(_, v)| !v.is_null()));
    }
    let names: Vec<&str> = to.iter().map(|t| t.as_str()).collect();
    let made = db
        .execute(
            "INSERT INTO alert_outbox (tenant_id, target, condition, app_id, subject, detail, held)
             SELECT $1, t, $2, $3, $4, $5, $6 FROM unnest($7::text[]) AS t",
            &[&tenant_s, &cond, &app.as_str(), &endpoint, &detail, &held, &names],
        )
        .await?;
    Ok(made)
}

/// Endpoints (of every tenant) failing since longer than their tenant's
/// `failingMinutes`, not disabled, about which no `endpoint.failing` alert was
/// sent since they began failing nor within the window: at most `limit`.
pub async fn failing(db: &impl GenericClient, limit: i64) -> Result<Vec<(TenantId, AppId, String)>, StoreError> {
    let rows = db
        .query(
            &format!(
                "WITH op AS (SELECT failing_secs, window_secs FROM alert_settings WHERE tenant_id = '{OPERATOR}')
                 SELECT e.tenant_id, e.app_id, e.id FROM endpoints e
                 JOIN applications a ON a.tenant_id = e.tenant_id AND a.id = e.app_id AND NOT a.operational
                 JOIN tenants t ON t.id = e.tenant_id AND t.deleted_at IS NULL AND NOT t.disabled
                 LEFT JOIN alert_settings s ON s.tenant_id = e.tenant_id
                 LEFT JOIN op ON true
                 WHERE e.failing_since IS NOT NULL AND NOT e.disabled
                   AND e.failing_since <= now() - make_interval(secs =>
                        COALESCE(s.failing_secs, op.failing_secs, {FAILING_SECS}))
                   AND NOT EXISTS (SELECT 1 FROM alert_marks k
                        WHERE k.tenant_id = e.tenant_id AND k.condition = 'endpoint.failing' AND k.subject = e.id
                          AND (k.sent_at >= e.failing_since OR k.sent_at > now() - make_interval(secs =>
                                COALESCE(s.window_secs, op.window_secs, {WINDOW_SECS}))))
                 ORDER BY e.failing_since LIMIT $1"
            ),
            &[&limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (TenantId::from_db(r.get("tenant_id")), AppId::from_db(r.get("app_id")), r.get("id")))
        .collect())
}

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
    let rows = db
        .query(
            "UPDATE alert_outbox o SET claim = $1, claimed_until = now() + make_interval(secs => $2),
                attempts = o.attempts + 1
             WHERE (o.tenant_id, o.id) IN (SELECT tenant_id, id FROM alert_outbox
                 WHERE due_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                 ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING o.id, o.tenant_id, o.target, o.condition, o.app_id, o.detail, o.held, o.attempts",
            &[&claim, &lease_secs, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some(Queued {
                id: r.get("id"),
                tenant: TenantId::from_db(r.get("tenant_id")),
                // A row this release cannot read (written by a newer one) is left to it.
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
