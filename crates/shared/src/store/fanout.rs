//! The one fan-out rule: which endpoints of its application a message goes to.
//! Every statement that creates messages (API publishing, single or batched, and
//! ingress admission) inserts its deliveries with [`insert_deliveries`], and sync
//! forwarding selects its targets with [`MATCHES`], so the rule is written once.

use tokio_postgres::GenericClient;

use super::{
    endpoints::{self, Endpoint},
    StoreError,
};
use crate::ids::{AppId, TenantId};
use crate::status::{Delivery, EndpointKind};

/// An endpoint `e` is subscribed to a message `m` (a row with `tenant_id`,
/// `app_id`, `event_type` and `channels`): of its application, subscribed to the
/// event type (or to all), and sharing a channel with the message (or taking
/// every channel). Enabled or not.
macro_rules! subscribed {
    () => {
        "e.tenant_id = m.tenant_id AND e.app_id = m.app_id
    AND (e.event_types IS NULL OR m.event_type = ANY (e.event_types))
    AND (e.channels IS NULL OR e.channels && m.channels)"
    };
}

/// The message `m`'s payload passes the content filter of `e`, if it has one
/// (`crate::filter`). `CASE`, so that an endpoint without a filter never parses
/// the payload (the function is also `STRICT`).
macro_rules! passes {
    () => {
        " AND CASE WHEN e.filter_path IS NULL THEN true
            ELSE COALESCE(hookgate_filter_passes(m.payload, e.filter_path), false) END"
    };
}

/// [`passes!`] for a message row named `m` otherwise: replay-missing's scan.
pub(super) fn passes(m: &str) -> String {
    passes!().replace("m.payload", &format!("{m}.payload"))
}

/// An endpoint `e` takes a message `m` (which carries its `payload`):
/// subscribed to it, enabled, and its content filter passed.
pub(super) const MATCHES: &str = concat!(subscribed!(), " AND NOT e.disabled", passes!());

/// An endpoint `e` may take a message `m` of which only the event type and
/// channels are known (no payload, so no content filter is judged): precheck.
pub(super) const MAY_MATCH: &str = concat!(subscribed!(), " AND NOT e.disabled");

/// A sink `e` logs a message `m` it is subscribed to even while disabled: a
/// disabled destination "receives nothing until it is re-enabled" (Svix's
/// `DestinationIn`), and then catches up from its log. Its runner parks it
/// meanwhile (a publish does not wake a parked row), and a poll of it reads
/// nothing.
const LOGS: &str = concat!(subscribed!(), passes!());

/// CTEs that insert one due delivery per matching endpoint for each row of
/// `messages` (a CTE returning `tenant_id, app_id, id, event_type, channels, payload`),
/// as `dels` (returning each delivery's `tenant_id, app_id, msg_id,
/// endpoint_id, next_attempt_at`), and wake their endpoints in the same
/// statement (`wakes::lower`).
///
/// Sinks (FIFO and polling endpoints: [`EndpointKind::is_sink`]) take the
/// message in their log (`sink_log`, in message-id order within the statement)
/// instead, enabled or not ([`LOGS`]).
pub(super) fn insert_deliveries(messages: &str) -> String {
    let sinks = EndpointKind::sql_set(EndpointKind::is_sink);
    // Named, not "every kind but the sinks": a kind a newer release admitted is
    // no business of this one's.
    let sent = EndpointKind::sql_set(|k| !k.is_sink());
    let batched = EndpointKind::sql_set(|k| k.delivery() == Delivery::Batches);
    format!(
        "dels AS (
            INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, next_attempt_at)
            SELECT e.tenant_id, e.app_id, m.id, e.id, now() FROM {messages} m JOIN endpoints e ON {MATCHES}
                AND e.kind IN {sent}
            RETURNING tenant_id, app_id, msg_id, endpoint_id, next_attempt_at
         ), sunk AS (
            SELECT e.tenant_id, e.app_id, e.id AS endpoint_id, m.id AS msg_id, e.kind,
                CASE WHEN e.fifo_key IS NULL THEN '' ELSE hookgate_fifo_key(m.payload, e.fifo_key) END AS key
            FROM {messages} m JOIN endpoints e ON {LOGS} AND e.kind IN {sinks}
         ), logged AS (
            INSERT INTO sink_log (tenant_id, app_id, endpoint_id, key, msg_id)
            SELECT tenant_id, app_id, endpoint_id, key, msg_id FROM sunk ORDER BY msg_id
         ), keyed AS (
            -- A FIFO endpoint's progress row for the key (made by a keyed endpoint's
            -- first message of it), made due now if it was idle (resting, no batch
            -- held) and no runner holds it; in key order, so concurrent statements
            -- lock rows alike. The row is locked even where nothing is written:
            -- a runner ending its turn waits for this statement before it decides
            -- whether the row may rest (`fifo::end`), so no wake is lost. A parked
            -- row (its endpoint or tenant shut) is not woken: enabling them does
            -- that. Judged by the row, not by the endpoint as this statement's
            -- snapshot reads it, which may predate an enable whose wake has passed.
            INSERT INTO fifo_state AS f (tenant_id, app_id, endpoint_id, key)
            SELECT DISTINCT tenant_id, app_id, endpoint_id, key FROM sunk WHERE kind IN {batched}
            ORDER BY tenant_id, app_id, endpoint_id, key
            ON CONFLICT (tenant_id, app_id, endpoint_id, key) DO UPDATE SET next_at = now()
            WHERE f.batch_xid IS NULL AND NOT f.parked AND f.next_at > now()
              AND (f.lease_until IS NULL OR f.lease_until < now())
         ), {}",
        super::wakes::lower("dels")
    )
}

/// The enabled HTTP endpoints of an application that subscribe to `event_type`
/// (and take messages without channels) and whose content filter `payload`
/// passes: sync forwarding's targets.
pub async fn matching(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    event_type: &str,
    payload: &[u8],
) -> Result<Vec<Endpoint>, StoreError> {
    let cols = endpoints::COLUMNS.split(',').map(|c| format!("e.{}", c.trim())).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT {cols} FROM endpoints e,
            (SELECT $1::text AS tenant_id, $2::text AS app_id, $3::text AS event_type, NULL::text[] AS channels,
                $4::bytea AS payload) m
         WHERE e.kind IN {} AND {}",
        EndpointKind::sql_set(|k| k == EndpointKind::Http),
        MATCHES
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &app.as_str(), &event_type, &payload]).await?;
    Ok(rows.iter().map(endpoints::from_row).collect())
}

/// Whether a message of `event_type` on `channels` would reach any enabled
/// endpoint or destination of the application now (`message.precheck`): the
/// fan-out's own rule, on a message that is not made (and has no payload, so an
/// endpoint's content filter is taken as passed).
pub async fn any_matching(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    event_type: &str,
    channels: Option<&[String]>,
) -> Result<bool, StoreError> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM endpoints e,
            (SELECT $1::text AS tenant_id, $2::text AS app_id, $3::text AS event_type, $4::text[] AS channels) m
         WHERE {})",
        MAY_MATCH
    );
    let row = db.query_one(&sql, &[&tenant.as_str(), &app.as_str(), &event_type, &channels]).await?;
    Ok(row.get(0))
}

/// Whether `payload` passes a content filter's compiled `predicate`, judged as
/// the fan-out judges it (the same SQL function): the `…/filter/try` route.
pub async fn filter_passes(db: &impl GenericClient, payload: &[u8], predicate: &str) -> Result<bool, StoreError> {
    let row = db
        .query_one("SELECT COALESCE(hookgate_filter_passes($1, $2::text::jsonpath), false)", &[&payload, &predicate])
        .await?;
    Ok(row.get(0))
}
