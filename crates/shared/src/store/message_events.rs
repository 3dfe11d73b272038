//! Svix's polling streams (`v1.events.stream`, `v1.message.events`): a tenant's or
//! an application's messages after an iterator, oldest first, in bounded pages.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::messages::{from_row, Message, COLUMNS};
use super::StoreError;
use crate::ids::{AppId, TenantId};

/// Which messages a page of the stream takes, beside the tenant.
#[derive(Debug, Clone)]
pub struct EventsWindow<'a> {
    /// `None`: every application of the tenant.
    pub app: Option<&'a AppId>,
    /// Messages with a larger id than this (the last one a page returned, or an id floor).
    pub after_id: &'a str,
    /// Messages with a smaller id than this: the settled horizon. A message's id is
    /// made before it commits, so one made a moment ago may still appear below ids
    /// already read; a page never reads that close to now, so a poller misses none.
    pub before_id: &'a str,
    pub event_types: Option<&'a [String]>,
    pub channels: Option<&'a [String]>,
    pub limit: i64,
    /// When `after_id` was made: the tenant's stream reads its `messages_created`
    /// index from a little before it.
    pub since: DateTime<Utc>,
}

/// Up to `limit + 1` messages of the window, oldest first (the extra says more follow).
/// The id bounds keep the scan to the partitions they span.
pub async fn events(
    db: &impl GenericClient,
    tenant: &TenantId,
    w: &EventsWindow<'_>,
) -> Result<Vec<Message>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM messages WHERE tenant_id = $1 AND ($2::text IS NULL OR app_id = $2)
           AND id > $3 AND id < $4 AND created_at >= $8::timestamptz - interval '5 minutes'
           AND ($5::text[] IS NULL OR event_type = ANY ($5))
           AND ($6::text[] IS NULL OR channels && $6)
         ORDER BY id ASC LIMIT $7"
    );
    let types = w.event_types.map(<[String]>::to_vec);
    let channels = w.channels.map(<[String]>::to_vec);
    let rows = db
        .query(
            &sql,
            &[
                &tenant.as_str(),
                &w.app.map(AppId::as_str),
                &w.after_id,
                &w.before_id,
                &types,
                &channels,
                &(w.limit + 1),
                &w.since,
            ],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// The id of the first message of the tenant (or application) after `after_id`
/// and before `before_id`, whatever its type: where a stream's window starts.
/// By the application's key, or the tenant's `messages_created` index from
/// `since` (when `after_id` was made; the margin covers clocks apart).
pub async fn first_after(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: Option<&AppId>,
    (after_id, since): (&str, DateTime<Utc>),
    before_id: &str,
) -> Result<Option<String>, StoreError> {
    let row = match app {
        Some(app) => {
            db.query_opt(
                "SELECT id FROM messages WHERE tenant_id = $1 AND app_id = $2 AND id > $3 AND id < $4
                 ORDER BY id LIMIT 1",
                &[&tenant.as_str(), &app.as_str(), &after_id, &before_id],
            )
            .await?
        }
        None => {
            db.query_opt(
                "SELECT id FROM messages WHERE tenant_id = $1 AND id > $2 AND id < $3
                   AND created_at >= $4::timestamptz - interval '5 minutes'
                 ORDER BY created_at, id LIMIT 1",
                &[&tenant.as_str(), &after_id, &before_id, &since],
            )
            .await?
        }
    };
    Ok(row.map(|r| r.get(0)))
}
