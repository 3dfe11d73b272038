//! Group commit for async ingress: many requests' admissions in one transaction,
//! one statement per tenant (a batch of one tenant's rows is one statement).
//!
//! The decision is still one `INSERT … ON CONFLICT DO NOTHING` per key into
//! `inbound_keys`, here over the whole batch in key order (tenants in order, each
//! tenant's keys in order), so concurrent batches on any number of instances take
//! the unique-index locks in the same order and cannot deadlock; only the keys
//! that won write their event rows.

use tokio_postgres::GenericClient;

use super::inbound_events::Existing;
use super::usage::{self, Counter};
use super::{fanout, StoreError};
use crate::{
    ids::{AppId, EndpointId, InboundEventId, MessageId, SourceId, TenantId},
    status::InboundStatus,
};

/// One admission of a batch; `msg_id` is the message it creates if it wins.
#[derive(Debug, Clone)]
pub struct BatchRow {
    pub tenant_id: TenantId,
    pub source_id: SourceId,
    pub key: String,
    /// The key's plain form while events admitted before keys were keyed may
    /// remain: a key stored in it is this event's too.
    pub plain_key: Option<String>,
    pub id: InboundEventId,
    pub app_id: AppId,
    pub msg_id: MessageId,
    pub event_type: String,
    pub content_type: String,
    pub payload: Vec<u8>,
    /// The admitting request's W3C trace context, kept for the message's delivery.
    pub traceparent: Option<String>,
}

/// Whether an admitted event's body is stored only in its message: once the
/// previous release, which reads the event's own copy, has gone (its contract,
/// 0045, applied). One lookup per statement (an uncorrelated subquery).
const ONE_COPY: &str = "EXISTS (SELECT 1 FROM hookgate_migrations WHERE version = '0045_lean_checks')";

/// The CTEs that turn the admitted inbound rows of a CTE `ins` (returning `id,
/// tenant_id, app_id, msg_id, key, event_type, content_type, payload, traceparent`) into their
/// messages and deliveries: the message's eventId is the inbound event's id, its
/// Idempotency-Key the inbound key. One text for both ways an event is admitted.
fn messages_of_admitted() -> String {
    format!(
        "msgs AS (
            INSERT INTO messages (tenant_id, app_id, id, event_id, event_type, payload, content_type, idempotency_key,
                traceparent)
            SELECT tenant_id, app_id, msg_id, id, event_type, payload, content_type, key, traceparent FROM ins
            RETURNING tenant_id, app_id, id, event_type, channels, payload
         ), {}, {}",
        fanout::insert_deliveries("msgs"),
        super::inbound_events::accepted_usage("ins")
    )
}

/// Admits a batch of rows of any tenants in one commit: each tenant's rows in a
/// statement of its own (pipelined in one transaction, in tenant order, when the
/// batch holds more than one tenant). Per input row, whether it was the one
/// admitted, and if so the endpoints its deliveries go to. Rows must not repeat
/// a key (the caller keeps the first of each key).
pub async fn admit_batches(
    db: &mut deadpool_postgres::Client,
    rows: &[BatchRow],
) -> Result<Vec<Option<Vec<EndpointId>>>, StoreError> {
    let groups = by_tenant(rows);
    let parts = per_tenant!(db, groups, admit_batch);
    let mut out: std::collections::HashMap<&InboundEventId, Option<Vec<EndpointId>>> = Default::default();
    for ((_, rows), results) in groups.iter().zip(parts) {
        for (r, won) in rows.iter().zip(results) {
            out.insert(&r.id, won);
        }
    }
    Ok(rows.iter().map(|r| out.remove(&r.id).flatten()).collect())
}

/// A batch's rows by tenant, in tenant order.
fn by_tenant<R: std::borrow::Borrow<BatchRow> + Clone>(rows: &[R]) -> Vec<(&TenantId, Vec<R>)> {
    let mut groups: std::collections::BTreeMap<&TenantId, Vec<R>> = Default::default();
    for r in rows {
        groups.entry(&r.borrow().tenant_id).or_default().push(r.clone());
    }
    groups.into_iter().collect()
}

/// One tenant's rows: inserts those whose key is new, their messages and their
/// deliveries, in one statement: alone (autocommit) it is one round trip and one
/// commit for the whole batch. The caller wakes the workers afterwards.
pub async fn admit_batch(
    db: &impl deadpool_postgres::GenericClient,
    tenant: &TenantId,
    rows: &[BatchRow],
) -> Result<Vec<Option<Vec<EndpointId>>>, StoreError> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| (&rows[a].source_id, &rows[a].key).cmp(&(&rows[b].source_id, &rows[b].key)));
    let col = |f: fn(&BatchRow) -> &str| order.iter().map(|&i| f(&rows[i]).to_owned()).collect::<Vec<String>>();
    let payloads: Vec<&[u8]> = order.iter().map(|&i| rows[i].payload.as_slice()).collect();
    let traces: Vec<Option<&str>> = order.iter().map(|&i| rows[i].traceparent.as_deref()).collect();
    let plains: Vec<Option<&str>> = order.iter().map(|&i| rows[i].plain_key.as_deref()).collect();
    // The message's eventId is the inbound event's id (unique per admission, so a
    // key admitted again after its window gets a new message); its Idempotency-Key
    // is the inbound key, the same on every admission of the provider's event.
    let statement = db
        .prepare_cached(&format!(
            "WITH input AS (
                SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::text[], $9::bytea[], $10::text[], $11::text[])
                    WITH ORDINALITY AS u(s, k, i, a, m, e, c, p, tp, pk, n)
             ), {}, {}, won AS (
                INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, keyed)
                SELECT $1, s, k, i, true FROM input
                JOIN locked_sources ls ON ls.id = input.s JOIN locked_apps la ON la.id = input.a
                -- Keys are only ever written keyed now: a plain one found here was
                -- committed before the switch and stays. A lookup per row, and none
                -- for a row without a plain form (LIMIT keeps the planner from
                -- reading the tenant's every key once to compare them all; the
                -- NULL test is decided before any index is read).
                LEFT JOIN LATERAL (
                    SELECT true AS found FROM inbound_keys o
                    WHERE pk IS NOT NULL AND o.tenant_id = $1 AND o.source_id = s AND o.key = pk
                    LIMIT 1
                ) plain ON true
                WHERE plain.found IS NULL
                ORDER BY n
                ON CONFLICT (tenant_id, source_id, key) DO NOTHING
                RETURNING event_id
             ), stored AS (
                -- The body is stored once, in the message the event becomes: the
                -- event's own copy stays empty and is read from the message.
                INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, msg_id, event_type,
                    content_type, payload, traceparent)
                SELECT $1, s, k, i, 'accepted', a, m, e, c, CASE WHEN {ONE_COPY} THEN NULL ELSE p END, tp
                FROM input JOIN won ON won.event_id = input.i
                RETURNING id
             ), ins AS (
                SELECT i AS id, $1::text AS tenant_id, a AS app_id, m AS msg_id, k AS key, e AS event_type,
                    c AS content_type, p AS payload, tp AS traceparent
                FROM input JOIN stored ON stored.id = input.i
             ), {}
             SELECT i.id, COALESCE(d.eps, '{{}}') AS eps FROM ins i
             LEFT JOIN (SELECT msg_id, array_agg(endpoint_id) AS eps FROM dels GROUP BY msg_id) d
                ON d.msg_id = i.msg_id",
            super::parents::lock_apps("$1", "input", "a"),
            super::parents::lock_sources("$1", "input", "s"),
            messages_of_admitted()
        ))
        .await?;
    let inserted = db
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &col(|r| r.source_id.as_str()),
                &col(|r| &r.key),
                &col(|r| r.id.as_str()),
                &col(|r| r.app_id.as_str()),
                &col(|r| r.msg_id.as_str()),
                &col(|r| &r.event_type),
                &col(|r| &r.content_type),
                &payloads,
                &traces,
                &plains,
            ],
        )
        .await?;
    let mut won: std::collections::HashMap<String, Vec<EndpointId>> = inserted
        .iter()
        .map(|r| (r.get("id"), r.get::<_, Vec<String>>("eps").into_iter().map(EndpointId::from_db).collect()))
        .collect();
    Ok(rows.iter().map(|r| won.remove(r.id.as_str())).collect())
}

/// Counts duplicates of a batch's losing rows, of any tenants, and returns what
/// each one's key holds (`None` where the row is gone): one statement per tenant,
/// in one transaction when there are several.
pub async fn duplicates_batches(
    db: &mut deadpool_postgres::Client,
    rows: &[&BatchRow],
) -> Result<Vec<Option<Existing>>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let groups = by_tenant(rows);
    let parts = per_tenant!(db, groups, duplicates_batch);
    // Each row's answer by its place in its tenant's group, in input order.
    let mut found: std::collections::HashMap<&TenantId, std::vec::IntoIter<Option<Existing>>> =
        groups.iter().map(|(t, _)| *t).zip(parts.into_iter().map(Vec::into_iter)).collect();
    Ok(rows.iter().map(|r| found.get_mut(&r.tenant_id).and_then(Iterator::next).flatten()).collect())
}

/// One tenant's losing rows: counts their duplicates and returns what each one's
/// key holds (`None` where the row is gone), in order.
pub async fn duplicates_batch(
    db: &impl deadpool_postgres::GenericClient,
    tenant: &TenantId,
    rows: &[&BatchRow],
) -> Result<Vec<Option<Existing>>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: fn(&BatchRow) -> &str| rows.iter().map(|r| f(r).to_owned()).collect::<Vec<String>>();
    let plains: Vec<Option<&str>> = rows.iter().map(|r| r.plain_key.as_deref()).collect();
    // Found by the key in either form; answered by the keyed one the row asked with.
    let sql = format!(
        "WITH dup AS (
            UPDATE inbound_events e SET duplicates = e.duplicates + u.n
            FROM (SELECT k.tenant_id, k.source_id, k.event_id, x.n, k.received_at, x.k AS asked, k.key
                  FROM (SELECT s, k, pk, count(*)::int AS n FROM unnest($2::text[], $3::text[], $4::text[]) AS x(s, k, pk)
                        GROUP BY s, k, pk) AS x
                  -- A lookup per row (OFFSET 0 keeps the subquery apart, so it is
                  -- not joined by reading the tenant's every key).
                  JOIN LATERAL (SELECT * FROM inbound_keys k
                                 WHERE k.tenant_id = $1 AND k.source_id = x.s AND k.key = ANY(ARRAY[x.k, x.pk])
                                OFFSET 0) k ON true) AS u
            WHERE e.tenant_id = $1 AND e.source_id = u.source_id AND e.id = u.event_id
            RETURNING e.tenant_id, e.source_id, u.asked, e.id, e.status, COALESCE(e.lease_until < now(), false) AS x, u.n,
                GREATEST(EXTRACT(EPOCH FROM now() - u.received_at), 0)::bigint AS age, u.key
         ), {}
         SELECT source_id, asked, id, status, x, age, key FROM dup",
        usage::bump("usage", "dup", &[(Counter::InboundDuplicates, "sum(n)")])
    );
    let found = db.query(&sql, &[&tenant.as_str(), &col(|r| r.source_id.as_str()), &col(|r| &r.key), &plains]).await?;
    let found: std::collections::HashMap<(String, String), Existing> = found
        .iter()
        .map(|r| {
            let existing = Existing {
                id: InboundEventId::from_db(r.get("id")),
                key: r.get("key"),
                status: InboundStatus::from_db(r.get("status")),
                lease_expired: r.get("x"),
                age_secs: r.get("age"),
            };
            ((r.get("source_id"), r.get("asked")), existing)
        })
        .collect();
    Ok(rows.iter().map(|r| found.get(&(r.source_id.to_string(), r.key.clone())).cloned()).collect())
}

/// Async admission of a key whose row a sync-mode request left `processing` and
/// abandoned (its lease ran out; the source is async now): the row becomes the
/// admitted event, with its message and deliveries, in one statement. `None`
/// when the row is not such a row (any more).
pub async fn take_over_async(db: &impl GenericClient, row: &BatchRow) -> Result<Option<InboundEventId>, StoreError> {
    let found = db
        .query_opt(
            &format!(
                "WITH input AS (SELECT $5::text AS a), {}, ins AS (
                    -- The body goes to the message only (see `admit_batch`).
                    UPDATE inbound_events e SET status = 'accepted', msg_id = $4, app_id = $5, event_type = $6,
                        content_type = $7, payload = CASE WHEN {ONE_COPY} THEN NULL ELSE $8 END, traceparent = $9,
                        lease_until = NULL, lease_token = NULL
                    FROM inbound_keys k
                    WHERE k.tenant_id = $1 AND k.source_id = $2 AND k.key = ANY(ARRAY[$3, $10])
                      AND e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
                      AND e.status = 'processing' AND e.lease_until < now()
                      AND EXISTS (SELECT 1 FROM locked_apps)
                    RETURNING e.id, e.tenant_id, e.app_id, e.msg_id, e.key, e.event_type, e.content_type,
                        $8::bytea AS payload, e.traceparent
                 ), {}
                 SELECT id FROM ins",
                super::parents::lock_apps("$1", "input", "a"),
                messages_of_admitted()
            ),
            &[
                &row.tenant_id.as_str(),
                &row.source_id.as_str(),
                &row.key,
                &row.msg_id.as_str(),
                &row.app_id.as_str(),
                &row.event_type,
                &row.content_type,
                &row.payload,
                &row.traceparent,
                &row.plain_key,
            ],
        )
        .await?;
    Ok(found.map(|r| InboundEventId::from_db(r.get(0))))
}
