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
/// the whole chain. Every lookup is by a key table or an id (partition pruned).
///
/// Inbound keys are stored derived per source (`inbound_keys` holds no provider
/// id in clear): `inbound_keys` are the keys `q` would have in each of the
/// tenant's sources, derived by the caller, with `q` itself among them.
pub async fn find(
    db: &impl GenericClient,
    tenant: &TenantId,
    q: &str,
    inbound_keys: &[String],
) -> Result<Found, StoreError> {
    let q = q.trim();
    if q.is_empty() {
        return Ok(Found::default());
    }
    let inbound_sql = format!(
        "SELECT source_id, {} FROM inbound_events
         WHERE tenant_id = $1 AND (id = ANY ($2) OR id IN (SELECT event_id FROM inbound_keys WHERE tenant_id = $1 AND key = ANY ($3)))
         ORDER BY id DESC LIMIT $4",
        inbound_events::COLUMNS
    );
    let inbound_rows = db.query(&inbound_sql, &[&tenant.as_str(), &vec![q.to_owned()], &inbound_keys, &LIMIT]).await?;
    let mut inbound: Vec<FoundInbound> = inbound_rows.iter().map(inbound_of).collect();

    let mut ids: Vec<String> = vec![q.to_owned()];
    ids.extend(inbound.iter().filter_map(|f| f.event.msg_id.as_ref().map(|m| m.to_string())));
    let message_sql = format!(
        "SELECT app_id, {} FROM messages
         WHERE tenant_id = $1 AND (id = ANY ($2)
            OR id IN (SELECT msg_id FROM message_event_ids WHERE tenant_id = $1 AND event_id = $3)
            OR id IN (SELECT msg_id FROM message_request_keys WHERE tenant_id = $1 AND key = $3))
         ORDER BY id DESC LIMIT $4",
        messages::COLUMNS
    );
    let rows = db.query(&message_sql, &[&tenant.as_str(), &ids, &q, &LIMIT]).await?;
    let found: Vec<FoundMessage> = rows
        .iter()
        .map(|r| FoundMessage { app_id: AppId::from_db(r.get(0)), message: messages::from_row_at(r, 1) })
        .collect();

    // An ingress message's eventId is its inbound event's id.
    let missing: Vec<String> = found
        .iter()
        .filter_map(|m| m.message.event_id.clone())
        .filter(|e| e.starts_with("evt_") && !inbound.iter().any(|f| f.event.id.as_str() == e))
        .collect();
    if !missing.is_empty() {
        let none: Vec<String> = Vec::new();
        let more = db.query(&inbound_sql, &[&tenant.as_str(), &missing, &none, &LIMIT]).await?;
        inbound.extend(more.iter().map(inbound_of));
    }
    Ok(Found { inbound, messages: found })
}

fn inbound_of(r: &tokio_postgres::Row) -> FoundInbound {
    FoundInbound { source_id: SourceId::from_db(r.get(0)), event: inbound_events::from_row_at(r, 1) }
}
