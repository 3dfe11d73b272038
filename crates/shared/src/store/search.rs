//! The console's search: one id or key, found across both directions (an
//! inbound event, the message it became, that message's deliveries and attempts).

use tokio_postgres::GenericClient;

use super::{inbound_events, inbound_events::InboundEvent, messages, messages::Message, StoreError};
use crate::ids::{AppId, SourceId, TenantId};

/// An inbound event with the source it came through.
#[derive(Debug, Clone)]
pub struct FoundInbound {
    pub source_id: SourceId,
    pub event: InboundEvent,
}

/// A message with its application.
#[derive(Debug, Clone)]
pub struct FoundMessage {
    pub app_id: AppId,
    pub message: Message,
}

#[derive(Debug, Clone, Default)]
pub struct Found {
    pub inbound: Vec<FoundInbound>,
    pub messages: Vec<FoundMessage>,
}

/// At most this many of each kind: a key is unique per source or application,
/// so more than a few matches means the query is not an id.
const LIMIT: i64 = 20;

/// Finds what `q` names in the tenant's data: a message id, an inbound event id,
/// a message's `eventId`, the `Idempotency-Key` that created a message, or an
/// inbound event's key (the provider's own event id). Each inbound event brings
/// its message and each ingress message its inbound event, so either end finds
/// the whole chain.
///
/// Every lookup is by a whole primary key or an id (partition pruned): the ids
/// are gathered first, then the rows read by id. Inbound keys are stored derived
/// per source (`inbound_keys` holds no provider id in clear): `inbound_keys`
/// are the (source, key) pairs `q` would have, derived by the caller. The key
/// tables of messages are keyed by application, so they are probed once per
/// application of the tenant rather than scanned.
pub async fn find(
    db: &impl GenericClient,
    tenant: &TenantId,
    q: &str,
    inbound_keys: &[(SourceId, String)],
) -> Result<Found, StoreError> {
    let q = q.trim();
    if q.is_empty() {
        return Ok(Found::default());
    }
    let (sources, keys): (Vec<&str>, Vec<&str>) = inbound_keys.iter().map(|(s, k)| (s.as_str(), k.as_str())).unzip();
    let keyed = db
        .query(
            "SELECT k.event_id FROM unnest($2::text[], $3::text[]) AS p(source_id, key)
             JOIN inbound_keys k ON k.tenant_id = $1 AND k.source_id = p.source_id AND k.key = p.key
             LIMIT $4",
            &[&tenant.as_str(), &sources, &keys, &LIMIT],
        )
        .await?;
    let mut event_ids: Vec<String> = vec![q.to_owned()];
    event_ids.extend(keyed.iter().map(|r| r.get::<_, String>(0)));
    let mut inbound = inbound_by_id(db, tenant, &event_ids).await?;

    let keyed = db
        .query(
            "(SELECT e.msg_id FROM applications a
              JOIN message_event_ids e ON e.tenant_id = a.tenant_id AND e.app_id = a.id AND e.event_id = $2
              WHERE a.tenant_id = $1 LIMIT $3)
             UNION
             (SELECT r.msg_id FROM applications a
              JOIN message_request_keys r ON r.tenant_id = a.tenant_id AND r.app_id = a.id AND r.key = $2
              WHERE a.tenant_id = $1 LIMIT $3)",
            &[&tenant.as_str(), &q, &LIMIT],
        )
        .await?;
    let mut ids: Vec<String> = vec![q.to_owned()];
    ids.extend(inbound.iter().filter_map(|f| f.event.msg_id.as_ref().map(|m| m.to_string())));
    ids.extend(keyed.iter().map(|r| r.get::<_, String>(0)));
    let message_sql = format!(
        "SELECT app_id, {} FROM messages WHERE tenant_id = $1 AND id = ANY ($2) ORDER BY id DESC LIMIT $3",
        messages::COLUMNS
    );
    let rows = db.query(&message_sql, &[&tenant.as_str(), &ids, &LIMIT]).await?;
    let found: Vec<FoundMessage> = rows
        .iter()
        .map(|r| FoundMessage { app_id: AppId::from_db(r.get("app_id")), message: messages::from_row(r) })
        .collect();

    // An ingress message's eventId is its inbound event's id.
    let missing: Vec<String> = found
        .iter()
        .filter_map(|m| m.message.event_id.clone())
        .filter(|e| e.starts_with("evt_") && !inbound.iter().any(|f| f.event.id.as_str() == e))
        .collect();
    if !missing.is_empty() {
        inbound.extend(inbound_by_id(db, tenant, &missing).await?);
    }
    Ok(Found { inbound, messages: found })
}

async fn inbound_by_id(
    db: &impl GenericClient,
    tenant: &TenantId,
    ids: &[String],
) -> Result<Vec<FoundInbound>, StoreError> {
    let sql = format!(
        "SELECT source_id, {} FROM inbound_events WHERE tenant_id = $1 AND id = ANY ($2) ORDER BY id DESC LIMIT $3",
        inbound_events::COLUMNS
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &ids, &LIMIT]).await?;
    Ok(rows.iter().map(inbound_of).collect())
}

fn inbound_of(r: &tokio_postgres::Row) -> FoundInbound {
    FoundInbound { source_id: SourceId::from_db(r.get("source_id")), event: inbound_events::from_row(r) }
}
