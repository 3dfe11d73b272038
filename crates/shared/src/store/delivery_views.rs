//! Read views over `deliveries`: a message's destinations, an endpoint's messages.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::deliveries::{SHOWN_NEXT_ATTEMPT, SHOWN_STATUS};
use super::{
    endpoints::{self, Endpoint},
    messages::{self, Message, MessageFilter},
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    ids::{AppId, EndpointId, MessageId, TenantId},
    status::DeliveryStatus,
};

/// A delivery's state as lists show it.
#[derive(Debug, Clone)]
pub struct DeliveryState {
    pub status: DeliveryStatus,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// A delivery's state from a row carrying `shown_status` and `shown_next_attempt_at`.
fn state(r: &tokio_postgres::Row) -> DeliveryState {
    DeliveryState {
        status: DeliveryStatus::from_db(r.get("shown_status")),
        next_attempt_at: r.get("shown_next_attempt_at"),
    }
}

fn prefixed(columns: &str, alias: &str) -> String {
    columns.split(',').map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

/// The endpoints a message was (or is being) delivered to, deleted ones too
/// (as Svix lists them): a deleted endpoint reads [`Endpoint::gone`], with the
/// URL its last attempt went to.
pub async fn destinations(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
    page: &PageRequest,
) -> Result<Page<(Endpoint, DeliveryState)>, StoreError> {
    let cols = prefixed(endpoints::COLUMNS, "e");
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    // The last attempt's URL is read only for an endpoint that is gone.
    let sql = format!(
        "SELECT {cols}, {SHOWN_STATUS} AS shown_status, {SHOWN_NEXT_ATTEMPT} AS shown_next_attempt_at,
                d.endpoint_id AS delivered_to, d.created_at AS delivered_at,
                CASE WHEN e.id IS NULL THEN
                    (SELECT a.url FROM attempts a WHERE a.tenant_id = d.tenant_id AND a.app_id = d.app_id
                        AND a.msg_id = d.msg_id AND a.endpoint_id = d.endpoint_id ORDER BY a.id DESC LIMIT 1)
                END AS last_url
         FROM deliveries d
         LEFT JOIN endpoints e ON e.tenant_id = d.tenant_id AND e.app_id = d.app_id AND e.id = d.endpoint_id
         WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.msg_id = $3 AND ($4::text IS NULL OR d.endpoint_id {cmp} $4)
         ORDER BY d.endpoint_id {dir} LIMIT $5"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &app.as_str(), &msg.as_str(), &key, &page.fetch_limit()]).await?;
    let items = rows
        .iter()
        .map(|r| {
            let endpoint = match r.get::<_, Option<String>>("id") {
                Some(_) => endpoints::from_row(r),
                None => Endpoint::gone(
                    EndpointId::from_db(r.get("delivered_to")),
                    r.get::<_, Option<String>>("last_url").unwrap_or_default(),
                    r.get("delivered_at"),
                ),
            };
            (endpoint, state(r))
        })
        .collect();
    Ok(Page::from_rows(items, page, |(e, _)| e.id.to_string()))
}

/// The messages delivered (or being delivered) to an endpoint, newest first.
pub async fn attempted_messages(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    endpoint: &EndpointId,
    page: &PageRequest,
    status: Option<DeliveryStatus>,
    f: &MessageFilter,
) -> Result<Page<(Message, DeliveryState)>, StoreError> {
    let cols = prefixed(messages::COLUMNS, "m");
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!(
        "SELECT {cols}, {SHOWN_STATUS} AS shown_status, {SHOWN_NEXT_ATTEMPT} AS shown_next_attempt_at
         FROM deliveries d
         JOIN messages m ON m.tenant_id = d.tenant_id AND m.app_id = d.app_id AND m.id = d.msg_id
         WHERE d.tenant_id = $1 AND d.app_id = $2 AND d.endpoint_id = $3
           AND ($4::text IS NULL OR d.msg_id {cmp} $4)
           AND ($5::smallint IS NULL OR {SHOWN_STATUS} = $5)
           AND ($6::text IS NULL OR $6 = ANY (m.channels))
           AND ($7::text[] IS NULL OR m.event_type = ANY ($7))
           AND ($8::timestamptz IS NULL OR m.created_at < $8)
           AND ($9::timestamptz IS NULL OR m.created_at > $9)
         ORDER BY d.msg_id {dir} LIMIT $10"
    );
    let rows = db
        .query(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &endpoint.as_str(),
                &key,
                &status.map(DeliveryStatus::code),
                &f.channel,
                &f.event_types,
                &f.before,
                &f.after,
                &page.fetch_limit(),
            ],
        )
        .await?;
    let items = rows.iter().map(|r| (messages::from_row(r), state(r))).collect();
    Ok(Page::from_rows(items, page, |(m, _)| m.id.to_string()))
}
