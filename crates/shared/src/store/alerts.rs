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
    alert_settings::{self, AlertSettings, WINDOW_SECS},
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
    /// A broker source has read nothing, only errors, for the tenant's `failingMinutes`.
    SourceStalled,
}

impl Condition {
    pub const ALL: [Condition; 4] = [
        Condition::EndpointDisabled,
        Condition::EndpointFailing,
        Condition::AttemptExhausted,
        Condition::SourceStalled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::EndpointDisabled => "endpoint.disabled",
            Condition::EndpointFailing => "endpoint.failing",
            Condition::AttemptExhausted => "message.attempt.exhausted",
            Condition::SourceStalled => "source.stalled",
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
    pub const ALL: [Target; 5] =
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

/// Who is told of a condition: the tenant's side (its application's addresses,
/// its own addresses and chat) or the operator's. Each side has a mark and a
/// window of its own: a tenant's settings never hold back or hurry the operator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Tenant,
    Operator,
}

impl Side {
    /// The mark's name of `condition` on this side.
    pub(super) fn mark(self, condition: Condition) -> String {
        match self {
            Side::Tenant => condition.as_str().to_owned(),
            Side::Operator => format!("operator:{}", condition.as_str()),
        }
    }

    /// The targets this side has for `condition` of an application (`app_email`:
    /// whether it has addresses of its own).
    pub(super) fn targets(
        self,
        condition: Condition,
        app_email: bool,
        own: Option<&AlertSettings>,
        op: Option<&AlertSettings>,
    ) -> Vec<Target> {
        let c = condition.as_str();
        let mut out = Vec::new();
        let (s, email, chat) = match self {
            Side::Tenant => {
                if app_email && own.is_none_or(|s| s.tells(c)) {
                    out.push(Target::AppEmail);
                }
                (own, Target::TenantEmail, Target::TenantChat)
            }
            Side::Operator => (op, Target::OperatorEmail, Target::OperatorChat),
        };
        if let Some(s) = s.filter(|s| s.tells(c)) {
            if s.email.is_some() {
                out.push(email);
            }
            if s.chat_url_sealed.is_some() {
                out.push(chat);
            }
        }
        out
    }

    /// The window: the tenant's own (else the operator's default) on its side,
    /// the operator's on the operator's; an hour where none is set.
    pub(super) fn window_secs(self, own: Option<&AlertSettings>, op: Option<&AlertSettings>) -> i32 {
        let op_window = op.and_then(|s| s.window_secs);
        match self {
            Side::Tenant => own.and_then(|s| s.window_secs).or(op_window),
            Side::Operator => op_window,
        }
        .unwrap_or(WINDOW_SECS)
    }
}

/// Alerts a tenant may have queued at once; past it, conditions are counted as
/// held, not queued (a flood of failing endpoints cannot flood an inbox).
const MOST_QUEUED: i64 = 500;

/// One condition about one endpoint, `count` times (0: not counted as held
/// when the window holds it back: a scan's finding, not an event).
struct Raise<'a> {
    tenant: &'a TenantId,
    app: &'a AppId,
    condition: Condition,
    endpoint: &'a str,
    extra: Value,
    count: i32,
}

/// Raises the alerts the notices of one transaction call for: an automatic
/// `endpoint.disabled` and each `message.attempt.exhausted`, grouped by endpoint
/// (a batch exhausting a hundred messages to one endpoint raises one alert, and
/// counts the rest as held). Called by `operational::emit`, in its transaction:
/// where no one is told, two reads for the whole batch.
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
    if groups.is_empty() {
        return Ok(0);
    }
    let mut tenants: Vec<&str> = groups.keys().map(|k| k.0).collect();
    tenants.push(OPERATOR);
    tenants.dedup();
    let settings = alert_settings::of_tenants(db, &tenants).await?;
    let (ts, apps): (Vec<&str>, Vec<&str>) = groups.keys().map(|k| (k.0, k.1)).unzip();
    let with_email: std::collections::HashSet<(String, String)> = db
        .query(
            "SELECT a.tenant_id, a.id FROM applications a
             JOIN unnest($1::text[], $2::text[]) AS g(t, app) ON a.tenant_id = g.t AND a.id = g.app
             WHERE a.alert_email IS NOT NULL",
            &[&ts, &apps],
        )
        .await?
        .iter()
        .map(|r| (r.get("tenant_id"), r.get("id")))
        .collect();
    let mut raised = 0;
    // In key order: two transactions raising for the same endpoints lock their
    // marks in the same order.
    for ((tenant, app, condition, endpoint), (count, n)) in groups {
        let own = settings.get(tenant);
        let op = settings.get(OPERATOR).filter(|_| tenant != OPERATOR);
        let app_email = with_email.contains(&(tenant.to_owned(), app.to_owned()));
        let extra = json!({
            "msgId": n.msg_id.as_ref().map(|m| m.to_string()),
            "responseStatusCode": n.attempt.as_ref().map(|(_, c)| *c),
        });
        let r = Raise { tenant: &n.tenant_id, app: &n.app_id, condition, endpoint, extra, count };
        raised += raise_sides(db, &r, app_email, own, op).await?;
    }
    Ok(raised)
}

/// Raises `condition` about `endpoint` of `app`, found by a scan (so counted as
/// held on no side): its settings read here.
pub async fn raise(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    condition: Condition,
    endpoint: &str,
) -> Result<u64, StoreError> {
    let (own, op) = alert_settings::with_operator(db, tenant).await?;
    let op = op.filter(|_| tenant.as_str() != OPERATOR);
    let app_email = super::alert_outbox::app_email(db, tenant, app).await?.is_some();
    let r = Raise { tenant, app, condition, endpoint, extra: json!({}), count: 0 };
    raise_sides(db, &r, app_email, own.as_ref(), op.as_ref()).await
}

/// [`raise_one`] for each side that has targets.
async fn raise_sides(
    db: &impl GenericClient,
    r: &Raise<'_>,
    app_email: bool,
    own: Option<&AlertSettings>,
    op: Option<&AlertSettings>,
) -> Result<u64, StoreError> {
    let mut made = 0;
    for side in [Side::Tenant, Side::Operator] {
        let to = side.targets(r.condition, app_email, own, op);
        if !to.is_empty() {
            made += raise_one(db, r, side, side.window_secs(own, op), &to).await?;
        }
    }
    Ok(made)
}

/// A URL as an alert shows it: no user, password, query or fragment (they may
/// carry credentials).
fn shown_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(an endpoint)".into(),
    }
}

/// Raises `r` on one side: if no alert of it was sent on that side within
/// `window`, one is queued per target (saying how many were held back since the
/// last), else it is counted as held. Nothing for an operational application's
/// endpoint, a deleted tenant's, or (`endpoint.failing`) an endpoint no longer
/// failing. Returns the rows queued.
async fn raise_one(
    db: &impl GenericClient,
    r: &Raise<'_>,
    side: Side,
    window: i32,
    to: &[Target],
) -> Result<u64, StoreError> {
    let (tenant, mark) = (r.tenant.as_str(), side.mark(r.condition));
    let about = db
        .query_opt(
            "SELECT a.uid AS app_uid, a.name AS app_name, e.uid AS ep_uid, e.url, e.failing_since, e.disabled
             FROM applications a JOIN tenants t ON t.id = a.tenant_id AND t.deleted_at IS NULL
             LEFT JOIN endpoints e ON e.tenant_id = a.tenant_id AND e.app_id = a.id AND e.id = $3
             WHERE a.tenant_id = $1 AND a.id = $2 AND NOT a.operational",
            &[&tenant, &r.app.as_str(), &r.endpoint],
        )
        .await?;
    let Some(about) = about else { return Ok(0) };
    let failing_since: Option<DateTime<Utc>> = about.get("failing_since");
    let still_failing = failing_since.is_some() && about.get::<_, Option<bool>>("disabled") == Some(false);
    if r.condition == Condition::EndpointFailing && !still_failing {
        return Ok(0);
    }
    let mut detail = json!({
        "tenantId": tenant,
        "appId": r.app.as_str(),
        "appUid": about.get::<_, Option<String>>("app_uid"),
        "appName": about.get::<_, String>("app_name"),
        "endpointId": r.endpoint,
        "endpointUid": about.get::<_, Option<String>>("ep_uid"),
        "url": about.get::<_, Option<String>>("url").as_deref().map(shown_url),
        "failingSince": failing_since,
    });
    if let (Some(d), Value::Object(more)) = (detail.as_object_mut(), r.extra.clone()) {
        d.extend(more.into_iter().filter(|(_, v)| !v.is_null()));
    }
    let q = Queue { tenant, mark: &mark, condition: r.condition, subject: r.endpoint, app: Some(r.app.as_str()) };
    mark_and_queue(db, &q, window, r.count, detail, to).await
}

/// What one raise marks and queues.
pub(super) struct Queue<'a> {
    pub tenant: &'a str,
    /// The mark's name: the condition's, on its side.
    pub mark: &'a str,
    pub condition: Condition,
    pub subject: &'a str,
    pub app: Option<&'a str>,
}

/// If no alert of `q` was sent within `window`, queues one per target with
/// `detail` (and how many were held back since the last) and marks it sent;
/// else counts `count` as held. Returns the rows queued.
pub(super) async fn mark_and_queue(
    db: &impl GenericClient,
    q: &Queue<'_>,
    window: i32,
    count: i32,
    detail: Value,
    to: &[Target],
) -> Result<u64, StoreError> {
    // The mark, made long ago if new, held by this transaction (a no-op update
    // takes its lock in the same statement: no gap for the pruner).
    let held = db
        .query_one(
            "INSERT INTO alert_marks AS k (tenant_id, condition, subject, sent_at) VALUES ($1, $2, $3, '-infinity')
             ON CONFLICT (tenant_id, condition, subject) DO UPDATE SET held = k.held
             RETURNING k.sent_at <= now() - make_interval(secs => $4) AS due, k.held",
            &[&q.tenant, &q.mark, &q.subject, &(window as f64)],
        )
        .await?;
    if !held.get::<_, bool>("due") {
        if count > 0 {
            db.execute(
                "UPDATE alert_marks SET held = held + $4 WHERE tenant_id = $1 AND condition = $2 AND subject = $3",
                &[&q.tenant, &q.mark, &q.subject, &count],
            )
            .await?;
        }
        return Ok(0);
    }
    let held = held.get::<_, i32>("held") + count.max(1) - 1;
    let names: Vec<&str> = to.iter().map(|t| t.as_str()).collect();
    // Queued and marked sent, unless the tenant has too many queued already:
    // then counted as held, told by the next alert that goes.
    let row = db
        .query_one(
            "WITH room AS (
                SELECT (SELECT count(*) FROM alert_outbox WHERE tenant_id = $1) < $9 AS ok
             ), m AS (
                UPDATE alert_marks SET sent_at = now(), held = 0
                WHERE tenant_id = $1 AND condition = $2 AND subject = $4 AND (SELECT ok FROM room)
             ), full_ AS (
                UPDATE alert_marks SET held = held + $10
                WHERE tenant_id = $1 AND condition = $2 AND subject = $4 AND NOT (SELECT ok FROM room)
             ), q AS (
                INSERT INTO alert_outbox (tenant_id, target, condition, app_id, subject, detail, held)
                SELECT $1, t, $3, $5, $4, $6, $7 FROM unnest($8::text[]) AS t
                WHERE (SELECT ok FROM room)
                RETURNING 1
             )
             SELECT count(*) AS n FROM q",
            &[
                &q.tenant,
                &q.mark,
                &q.condition.as_str(),
                &q.subject,
                &q.app,
                &detail,
                &held,
                &names,
                &MOST_QUEUED,
                &count.max(1),
            ],
        )
        .await?;
    Ok(row.get::<_, i64>("n") as u64)
}
