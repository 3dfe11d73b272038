//! Operational webhooks: each tenant's hidden application (its endpoints are the
//! operational webhook endpoints) and the statement that turns notices (an
//! endpoint created, a message's retries exhausted, …) into messages of that
//! application — and of the operator's, which receives every tenant's — with
//! their deliveries, by the one fan-out rule. Callers run [`emit`] in the
//! transaction that makes the change it reports, so a notice commits with it.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{fanout, tenants::OPERATOR, StoreError};
use crate::ids::{AppId, AttemptId, EndpointId, MessageId, TenantId};

/// What a message's attempt tells the operational webhooks, decided by the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptNotice {
    /// The fourth scheduled attempt failed and retries remain (`message.attempt.failing`).
    Failing,
    /// The last scheduled attempt failed (`message.attempt.exhausted`).
    Exhausted,
    /// A scheduled attempt after the fourth succeeded (`message.attempt.recovered`).
    Recovered,
}

impl AttemptNotice {
    pub fn event_type(self) -> &'static str {
        match self {
            AttemptNotice::Failing => "message.attempt.failing",
            AttemptNotice::Exhausted => "message.attempt.exhausted",
            AttemptNotice::Recovered => "message.attempt.recovered",
        }
    }
}

/// One operational event. The payload is built from the rows it names, as
/// Svix's server shapes it: `{"type", "data": {"appId", "appUid", …}}`.
#[derive(Debug, Clone)]
pub struct Notice {
    pub tenant_id: TenantId,
    pub event_type: &'static str,
    pub app_id: AppId,
    pub endpoint_id: Option<EndpointId>,
    /// The event's `data` when the caller builds it (a source's notices).
    pub data: Option<serde_json::Value>,
    /// The endpoint's uid where the row may be gone (`endpoint.deleted`).
    pub endpoint_uid: Option<String>,
    /// Attempt notices: the message and its last attempt.
    pub msg_id: Option<MessageId>,
    pub attempt: Option<(AttemptId, i16)>,
    /// `endpoint.disabled`: since when it failed, and `automatic` or `manual`.
    pub fail_since: Option<DateTime<Utc>>,
    pub trigger: Option<&'static str>,
}

impl Notice {
    /// A notice whose `data` the caller built, about something of `app`.
    pub fn with_data(tenant: &TenantId, event_type: &'static str, app: &AppId, data: serde_json::Value) -> Notice {
        Notice {
            tenant_id: tenant.clone(),
            event_type,
            app_id: app.clone(),
            endpoint_id: None,
            data: Some(data),
            endpoint_uid: None,
            msg_id: None,
            attempt: None,
            fail_since: None,
            trigger: None,
        }
    }

    pub fn endpoint(tenant: &TenantId, event_type: &'static str, app: &AppId, endpoint: &EndpointId) -> Notice {
        Notice {
            tenant_id: tenant.clone(),
            event_type,
            app_id: app.clone(),
            endpoint_id: Some(endpoint.clone()),
            data: None,
            endpoint_uid: None,
            msg_id: None,
            attempt: None,
            fail_since: None,
            trigger: None,
        }
    }
}

/// The tenant's operational application, made on first use.
pub async fn ensure_app(db: &impl GenericClient, tenant: &TenantId) -> Result<AppId, StoreError> {
    let made = AppId::generate();
    let row = db
        .query_one(
            // DO UPDATE (a no-op) rather than DO NOTHING: it returns the row a
            // concurrent creation committed, which this statement's snapshot misses.
            "INSERT INTO applications (tenant_id, id, name, operational)
             VALUES ($1, $2, 'Operational webhooks', true)
             ON CONFLICT (tenant_id) WHERE operational DO UPDATE SET operational = true
             RETURNING id",
            &[&tenant.as_str(), &made.as_str()],
        )
        .await?;
    Ok(AppId::from_db(row.get(0)))
}

/// The tenant's operational application, if it has one.
pub async fn app(db: &impl GenericClient, tenant: &TenantId) -> Result<Option<AppId>, StoreError> {
    let row =
        db.query_opt("SELECT id FROM applications WHERE tenant_id = $1 AND operational", &[&tenant.as_str()]).await?;
    Ok(row.map(|r| AppId::from_db(r.get(0))))
}

/// ISO 8601 in UTC with a `Z`, as Svix writes timestamps.
const ISO: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'"#;

/// Writes each notice as a message of its tenant's operational application and of
/// the operator's (with `tenantId` added), where they exist, with deliveries to
/// their matching endpoints. Notices about an operational application's own
/// endpoints and messages are dropped (they would feed themselves). Rows carry
/// their tenant. Returns the deliveries made: the caller wakes the workers after
/// its commit.
pub async fn emit(db: &impl GenericClient, notices: &[Notice]) -> Result<u64, StoreError> {
    if notices.is_empty() {
        return Ok(0);
    }
    let s = |f: &dyn Fn(&Notice) -> Option<String>| notices.iter().map(f).collect::<Vec<Option<String>>>();
    let sql = format!(
        "WITH p AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                $8::smallint[], $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::jsonb[])
                AS p(t, typ, app, ep, ep_uid, msg, att, code, since, trig, mt, mo, data)
         ), built AS (
            SELECT p.t AS tenant_id, p.app AS about, p.typ, p.mt, p.mo, jsonb_build_object('type', p.typ, 'data',
                CASE WHEN p.data IS NOT NULL THEN p.data
                WHEN p.typ LIKE 'message.attempt.%' THEN jsonb_build_object(
                    'appId', p.app, 'appUid', a.uid, 'msgId', p.msg, 'msgEventId', m.event_id, 'endpointId', p.ep,
                    'lastAttempt', jsonb_build_object('id', p.att, 'responseStatusCode', p.code,
                        'timestamp', to_char(now() AT TIME ZONE 'UTC', {ISO})))
                WHEN p.typ = 'endpoint.disabled' THEN jsonb_build_object(
                    'appId', p.app, 'appUid', a.uid, 'endpointId', p.ep, 'endpointUid', COALESCE(p.ep_uid, e.uid),
                    'failSince', to_char(p.since AT TIME ZONE 'UTC', {ISO}), 'trigger', p.trig)
                ELSE jsonb_build_object(
                    'appId', p.app, 'appUid', a.uid, 'endpointId', p.ep, 'endpointUid', COALESCE(p.ep_uid, e.uid))
                END) AS payload
            FROM p JOIN applications a ON a.tenant_id = p.t AND a.id = p.app AND NOT a.operational
            LEFT JOIN messages m ON p.msg IS NOT NULL AND m.tenant_id = p.t AND m.app_id = p.app AND m.id = p.msg
            LEFT JOIN endpoints e ON e.tenant_id = p.t AND e.app_id = p.app AND e.id = p.ep
         ), targets AS (
            SELECT o.tenant_id AS ot, o.id AS oapp, b.typ, b.about,
                CASE WHEN o.tenant_id = b.tenant_id THEN b.mt ELSE b.mo END AS mid,
                CASE WHEN o.tenant_id = b.tenant_id THEN b.payload
                     ELSE b.payload || jsonb_build_object('tenantId', b.tenant_id) END AS body
            FROM built b JOIN applications o ON o.operational
                AND (o.tenant_id = b.tenant_id OR (o.tenant_id = '{OPERATOR}' AND b.tenant_id <> '{OPERATOR}'))
            -- Only where the fan-out gives it an endpoint (the same rule; notices
            -- have no channels): no message piles up unread.
            WHERE EXISTS (SELECT 1 FROM endpoints x
                WHERE x.tenant_id = o.tenant_id AND x.app_id = o.id AND NOT x.disabled
                  AND (x.event_types IS NULL OR b.typ = ANY (x.event_types)) AND x.channels IS NULL)
         ), {}, msg AS (
            -- Tagged with the application it is about (for finding them again).
            INSERT INTO messages (tenant_id, app_id, id, event_type, payload, content_type, tags)
            SELECT ot, oapp, mid, typ, convert_to(body::text, 'UTF8'), 'application/json', ARRAY[about]
            FROM targets JOIN locked_apps la ON la.tenant_id = targets.ot AND la.id = targets.oapp
            RETURNING tenant_id, app_id, id, event_type, channels, payload
         ), {}
         SELECT count(*) FROM dels",
        super::parents::lock_apps_of_tenants("targets", "ot", "oapp"),
        fanout::insert_deliveries("msg")
    );
    let row = db
        .query_one(
            &sql,
            &[
                &s(&|n| Some(n.tenant_id.to_string())),
                &s(&|n| Some(n.event_type.to_owned())),
                &s(&|n| Some(n.app_id.to_string())),
                &s(&|n| n.endpoint_id.as_ref().map(|e| e.to_string())),
                &s(&|n| n.endpoint_uid.clone()),
                &s(&|n| n.msg_id.as_ref().map(|m| m.to_string())),
                &s(&|n| n.attempt.as_ref().map(|(a, _)| a.to_string())),
                &notices.iter().map(|n| n.attempt.as_ref().map(|(_, c)| *c)).collect::<Vec<Option<i16>>>(),
                &notices.iter().map(|n| n.fail_since).collect::<Vec<Option<DateTime<Utc>>>>(),
                &s(&|n| n.trigger.map(str::to_owned)),
                &s(&|_| Some(MessageId::generate().to_string())),
                &s(&|_| Some(MessageId::generate().to_string())),
                &notices.iter().map(|n| n.data.clone()).collect::<Vec<Option<serde_json::Value>>>(),
            ],
        )
        .await?;
    // A person is told too, where the tenant, application or operator asked.
    super::alerts::raise_notices(db, notices).await?;
    Ok(row.get::<_, i64>(0) as u64)
}
