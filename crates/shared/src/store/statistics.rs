//! The tenant's usage statistics the SDK's `statistics` group asks for: messages
//! sent per application in a window, and the event types each application's
//! endpoints subscribe to.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{self, AppId, MessageId, TenantId};

/// Applications one statistics request covers at most: one statement counts them all.
pub const MOST_APPS: i64 = 10_000;

/// One application's deliveries in a window (a statistics task's `appStats`).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppUsage {
    pub app_id: String,
    pub app_uid: Option<String>,
    /// One per message and endpoint or destination it went to.
    pub message_destinations: i64,
}

/// The event types one application's endpoints and destinations name (a
/// statistics task's `event_types`).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppEventTypes {
    pub app_id: String,
    /// Sorted.
    pub explicitly_subscribed_event_types: Vec<String>,
    /// Whether one of them takes every type.
    pub has_catch_all_endpoint: bool,
}

/// Per application (all, or those of `apps`), how many deliveries its messages
/// of `[since, until)` made (`messageDestinations`: one per message and endpoint
/// or destination it went to), as `{appId, appUid, messageDestinations}`.
/// The window goes by message id, which is made at creation.
pub async fn app_usage(
    db: &impl GenericClient,
    tenant: &TenantId,
    apps: Option<&[AppId]>,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<AppUsage>, StoreError> {
    let lo = ids::floor(MessageId::PREFIX, since);
    let hi = ids::floor(MessageId::PREFIX, until);
    let apps: Option<Vec<&str>> = apps.map(|a| a.iter().map(AppId::as_str).collect());
    let rows = db
        .query(
            "SELECT a.id, a.uid,
                (SELECT count(*) FROM deliveries d
                 WHERE d.tenant_id = $1 AND d.app_id = a.id AND d.msg_id >= $3 AND d.msg_id < $4)
                 AS message_destinations
             FROM applications a
             WHERE a.tenant_id = $1 AND NOT a.operational AND ($2::text[] IS NULL OR a.id = ANY ($2))
             ORDER BY a.id LIMIT $5",
            &[&tenant.as_str(), &apps, &lo, &hi, &MOST_APPS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AppUsage {
            app_id: r.get("id"),
            app_uid: r.get("uid"),
            message_destinations: r.get("message_destinations"),
        })
        .collect())
}

/// Per application, the event types its endpoints and destinations name
/// (`explicitlySubscribedEventTypes`, sorted) and whether one of them takes
/// every type (`hasCatchAllEndpoint`).
pub async fn subscribed_event_types(
    db: &impl GenericClient,
    tenant: &TenantId,
) -> Result<Vec<AppEventTypes>, StoreError> {
    let rows = db
        .query(
            "SELECT a.id,
                COALESCE(array_agg(DISTINCT t.name ORDER BY t.name) FILTER (WHERE t.name IS NOT NULL), '{}')
                    AS event_types,
                COALESCE(bool_or(e.id IS NOT NULL AND e.event_types IS NULL), false) AS catch_all
             FROM applications a
             LEFT JOIN endpoints e ON e.tenant_id = a.tenant_id AND e.app_id = a.id
             LEFT JOIN LATERAL unnest(e.event_types) AS t(name) ON true
             WHERE a.tenant_id = $1 AND NOT a.operational
             GROUP BY a.id ORDER BY a.id LIMIT $2",
            &[&tenant.as_str(), &MOST_APPS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AppEventTypes {
            app_id: r.get("id"),
            explicitly_subscribed_event_types: r.get("event_types"),
            has_catch_all_endpoint: r.get("catch_all"),
        })
        .collect())
}

/// One group of an application's attempts ([`app_attempts`]): its period (0
/// without periods), its messages' event type, its status code, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptCount {
    pub period: i64,
    pub event_type: String,
    pub status: i16,
    pub count: i64,
}

/// An application's attempts made in `[since, until)`, counted by period of
/// `period_secs` from `since` (none: one period), event type and status; only
/// of `event_types` when given.
///
/// Attempts are partitioned by message id, and their key per application is
/// (msg_id, id): the attempt id, made at attempt time, leads no index there, so
/// an id range alone would read the application's whole key range in every
/// partition. It leads `attempts_endpoint` (tenant, app, endpoint, id) after the
/// endpoint: so the endpoints that have attempts are found first (a skip scan
/// of that index: one probe per endpoint and partition, deleted endpoints
/// included), then each one's attempts of the window are one index range. The
/// cost is the window's attempts, plus a probe per endpoint ever attempted (in
/// retention) and partition.
pub async fn app_attempts(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    period_secs: Option<i64>,
    event_types: Option<&[String]>,
) -> Result<Vec<AttemptCount>, StoreError> {
    let (low, high) =
        (crate::ids::floor("atmpt", since), crate::ids::floor("atmpt", until + chrono::Duration::seconds(1)));
    let rows = db
        .query(
            "WITH RECURSIVE eps(id) AS (
                (SELECT endpoint_id FROM attempts WHERE tenant_id = $1 AND app_id = $2
                 ORDER BY endpoint_id LIMIT 1)
                UNION ALL
                SELECT (SELECT a.endpoint_id FROM attempts a
                        WHERE a.tenant_id = $1 AND a.app_id = $2 AND a.endpoint_id > eps.id
                        ORDER BY a.endpoint_id LIMIT 1)
                FROM eps WHERE eps.id IS NOT NULL
             )
             SELECT COALESCE(floor(EXTRACT(epoch FROM a.created_at - $3) / $5::bigint)::bigint, 0) AS period_no,
                 m.event_type, a.status, count(*) AS n
             FROM eps
             JOIN attempts a ON a.tenant_id = $1 AND a.app_id = $2 AND a.endpoint_id = eps.id
                AND a.id >= $6 AND a.id < $7
             JOIN messages m ON m.tenant_id = a.tenant_id AND m.app_id = a.app_id AND m.id = a.msg_id
             WHERE a.created_at >= $3 AND a.created_at < $4
               AND ($8::text[] IS NULL OR m.event_type = ANY ($8))
             GROUP BY 1, 2, 3",
            &[&tenant.as_str(), &app.as_str(), &since, &until, &period_secs, &low, &high, &event_types],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AttemptCount {
            period: r.get("period_no"),
            event_type: r.get("event_type"),
            status: r.get("status"),
            count: r.get("n"),
        })
        .collect())
}
