//! Group commit for the API's message creation: many requests' messages and their
//! deliveries in one commit; one statement per tenant, so every statement names
//! one tenant (a batch of one tenant's rows is one statement, so one commit).

use chrono::{DateTime, Utc};

use super::{fanout, StoreError};
use crate::ids::{AppId, EndpointId, MessageId, Ref, TenantId};

/// One message of a batch: no channels or tags (those take the single path).
#[derive(Debug, Clone)]
pub struct PublishRow {
    pub tenant_id: TenantId,
    /// The application, as the path named it.
    pub app: Ref<AppId>,
    pub msg_id: MessageId,
    pub event_id: Option<String>,
    pub event_type: String,
    pub payload: Vec<u8>,
    /// The creating request's W3C trace context, kept for the delivery spans.
    pub traceparent: Option<String>,
    pub payload_expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    Created {
        app_id: AppId,
        created_at: DateTime<Utc>,
        /// The endpoints its deliveries go to (made due in the same commit).
        endpoints: Vec<EndpointId>,
    },
    /// The `eventId` exists for the application (or repeats within the batch).
    Conflict,
    NoApplication,
}

/// Publishes a batch of rows of any tenants in one commit: each tenant's rows in a
/// statement of its own (pipelined in one transaction when the batch holds more
/// than one tenant). One outcome per row, in order.
pub async fn publish_batches(
    db: &mut deadpool_postgres::Client,
    rows: &[PublishRow],
) -> Result<Vec<Published>, StoreError> {
    let mut by_tenant: std::collections::BTreeMap<&TenantId, Vec<usize>> = Default::default();
    for (i, r) in rows.iter().enumerate() {
        by_tenant.entry(&r.tenant_id).or_default().push(i);
    }
    let groups: Vec<(&TenantId, Vec<PublishRow>)> =
        by_tenant.into_iter().map(|(t, ix)| (t, ix.iter().map(|&i| rows[i].clone()).collect())).collect();
    let parts = per_tenant!(db, groups, publish_batch);
    let mut out: std::collections::HashMap<&MessageId, Published> = std::collections::HashMap::new();
    for ((_, rows), results) in groups.iter().zip(parts) {
        for (r, p) in rows.iter().zip(results) {
            out.insert(&r.msg_id, p);
        }
    }
    Ok(rows.iter().map(|r| out.remove(&r.msg_id).unwrap_or(Published::NoApplication)).collect())
}

/// One tenant's rows of a batch, in one statement.
pub async fn publish_batch(
    db: &impl deadpool_postgres::GenericClient,
    tenant: &TenantId,
    rows: &[PublishRow],
) -> Result<Vec<Published>, StoreError> {
    // Unique-index locks in one order across concurrent batches.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| (rows[a].app.as_str(), &rows[a].event_id).cmp(&(rows[b].app.as_str(), &rows[b].event_id)));
    let s = |f: fn(&PublishRow) -> String| order.iter().map(|&i| f(&rows[i])).collect::<Vec<String>>();
    let event_ids: Vec<Option<String>> = order.iter().map(|&i| rows[i].event_id.clone()).collect();
    let payloads: Vec<&[u8]> = order.iter().map(|&i| rows[i].payload.as_slice()).collect();
    let traces: Vec<Option<&str>> = order.iter().map(|&i| rows[i].traceparent.as_deref()).collect();
    let expiries: Vec<Option<DateTime<Utc>>> = order.iter().map(|&i| rows[i].payload_expires_at).collect();
    let statement = db
        .prepare_cached(&format!(
            "WITH input AS (
                SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[],
                    $8::timestamptz[]) WITH ORDINALITY AS u(aref, m, eid, et, p, tp, px, n)
             ), resolved AS (
                SELECT DISTINCT ON (i.n) i.*, a.id AS app FROM input i
                JOIN applications a ON a.tenant_id = $1 AND (a.id = i.aref OR a.uid = i.aref) AND NOT a.operational
                ORDER BY i.n, (a.id = i.aref) DESC
             ), {}, live AS (
                -- Rows under an application erased meanwhile write nothing (`store::parents`).
                SELECT r.* FROM resolved r JOIN locked_apps la ON la.id = r.app
             ), event_ids AS (
                -- An eventId is the message's only if its row here is new.
                INSERT INTO message_event_ids (tenant_id, app_id, event_id, msg_id)
                SELECT $1, app, eid, m FROM live WHERE eid IS NOT NULL ORDER BY n
                ON CONFLICT (tenant_id, app_id, event_id) DO NOTHING
                RETURNING msg_id
             ), msg AS (
                INSERT INTO messages (tenant_id, app_id, id, event_id, event_type, payload, content_type, traceparent,
                    payload_expires_at)
                SELECT $1, app, m, eid, et, p, 'application/json', tp, px FROM live
                WHERE eid IS NULL OR m IN (SELECT msg_id FROM event_ids) ORDER BY n
                RETURNING tenant_id, app_id, id, event_type, channels, created_at, payload
             ), {}, {}
             SELECT r.m AS msg_id, r.app AS app_id, msg.created_at, COALESCE(d.eps, '{{}}') AS endpoint_ids
             -- A row under an application erased meanwhile is not here: no application.
             FROM live r LEFT JOIN msg ON msg.id = r.m
             LEFT JOIN (SELECT msg_id, array_agg(endpoint_id) AS eps FROM dels GROUP BY msg_id) d ON d.msg_id = r.m",
            super::parents::lock_apps("$1", "resolved", "app"),
            fanout::insert_deliveries("msg"),
            super::messages::created_usage("msg"),
        ))
        .await?;
    let found = db
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &s(|r| r.app.to_string()),
                &s(|r| r.msg_id.to_string()),
                &event_ids,
                &s(|r| r.event_type.clone()),
                &payloads,
                &traces,
                &expiries,
            ],
        )
        .await?;
    let by_id: std::collections::HashMap<String, Published> = found
        .iter()
        .map(|r| {
            let created: Option<DateTime<Utc>> = r.get("created_at");
            let p = match created {
                Some(created_at) => Published::Created {
                    app_id: AppId::from_db(r.get("app_id")),
                    created_at,
                    endpoints: r.get::<_, Vec<String>>("endpoint_ids").into_iter().map(EndpointId::from_db).collect(),
                },
                None => Published::Conflict,
            };
            (r.get::<_, String>("msg_id"), p)
        })
        .collect();
    Ok(rows.iter().map(|r| by_id.get(r.msg_id.as_str()).cloned().unwrap_or(Published::NoApplication)).collect())
}
