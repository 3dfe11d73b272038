//! Group commit for async ingress: many requests' admissions in one transaction.
//!
//! Each row carries its tenant id (a batch mixes tenants). The decision is still
//! one `INSERT … ON CONFLICT DO NOTHING` per key, here over the whole batch in key
//! order, so concurrent batches on any number of instances take the unique-index
//! locks in the same order and cannot deadlock.

use tokio_postgres::GenericClient;

use super::StoreError;

/// One admission of a batch; `msg_id` is the message it creates if it wins.
#[derive(Debug, Clone)]
pub struct BatchRow {
    pub tenant_id: String,
    pub source_id: String,
    pub key: String,
    pub id: String,
    pub app_id: String,
    pub msg_id: String,
    pub event_type: String,
    pub content_type: String,
    pub payload: Vec<u8>,
}

/// Inserts the rows whose key is new, their messages and their deliveries, in the
/// caller's transaction (the caller wakes the workers after its commit). Returns, per input row,
/// whether it was the one admitted. Rows must not repeat a key (the caller keeps
/// the first of each key).
pub async fn admit_batch(tx: &impl GenericClient, rows: &[BatchRow]) -> Result<Vec<bool>, StoreError> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        (&rows[a].tenant_id, &rows[a].source_id, &rows[a].key).cmp(&(
            &rows[b].tenant_id,
            &rows[b].source_id,
            &rows[b].key,
        ))
    });
    let col = |f: fn(&BatchRow) -> &str| order.iter().map(|&i| f(&rows[i]).to_owned()).collect::<Vec<String>>();
    let payloads: Vec<&[u8]> = order.iter().map(|&i| rows[i].payload.as_slice()).collect();
    let inserted = tx
        .query(
            "INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, msg_id, event_type,
                content_type, payload)
             SELECT t, s, k, i, 'accepted', a, m, e, c, p
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::bytea[]) WITH ORDINALITY AS u(t, s, k, i, a, m, e, c, p, n)
             ORDER BY n
             ON CONFLICT (tenant_id, source_id, key) DO NOTHING
             RETURNING id",
            &[
                &col(|r| &r.tenant_id),
                &col(|r| &r.source_id),
                &col(|r| &r.key),
                &col(|r| &r.id),
                &col(|r| &r.app_id),
                &col(|r| &r.msg_id),
                &col(|r| &r.event_type),
                &col(|r| &r.content_type),
                &payloads,
            ],
        )
        .await?;
    let won: std::collections::HashSet<String> = inserted.iter().map(|r| r.get(0)).collect();
    let admitted: Vec<bool> = rows.iter().map(|r| won.contains(&r.id)).collect();
    let winners: Vec<&BatchRow> = rows.iter().zip(&admitted).filter(|(_, w)| **w).map(|(r, _)| r).collect();
    if winners.is_empty() {
        return Ok(admitted);
    }
    let wcol = |f: fn(&BatchRow) -> &str| winners.iter().map(|r| f(r).to_owned()).collect::<Vec<String>>();
    let wpayloads: Vec<&[u8]> = winners.iter().map(|r| r.payload.as_slice()).collect();
    // The message's eventId and Idempotency-Key are the inbound key.
    tx.execute(
        "INSERT INTO messages (tenant_id, app_id, id, event_id, event_type, payload, content_type, idempotency_key)
         SELECT t, a, m, k, e, p, c, k
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[])
            AS u(t, a, m, k, e, p, c)",
        &[
            &wcol(|r| &r.tenant_id),
            &wcol(|r| &r.app_id),
            &wcol(|r| &r.msg_id),
            &wcol(|r| &r.key),
            &wcol(|r| &r.event_type),
            &wpayloads,
            &wcol(|r| &r.content_type),
        ],
    )
    .await?;
    tx.execute(
        "INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, next_attempt_at)
             SELECT e.tenant_id, e.app_id, u.m, e.id, now()
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(t, a, m, et)
             JOIN endpoints e ON e.tenant_id = u.t AND e.app_id = u.a
             WHERE NOT e.disabled AND (e.event_types IS NULL OR u.et = ANY (e.event_types)) AND e.channels IS NULL",
        &[&wcol(|r| &r.tenant_id), &wcol(|r| &r.app_id), &wcol(|r| &r.msg_id), &wcol(|r| &r.event_type)],
    )
    .await?;
    Ok(admitted)
}

/// Counts duplicates of a batch's losing rows and returns each one's existing
/// event id (`None` where the row is gone).
pub async fn duplicates_batch(db: &impl GenericClient, rows: &[&BatchRow]) -> Result<Vec<Option<String>>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: fn(&BatchRow) -> &str| rows.iter().map(|r| f(r).to_owned()).collect::<Vec<String>>();
    let found = db
        .query(
            "UPDATE inbound_events e SET duplicates = e.duplicates + u.n
             FROM (SELECT t, s, k, count(*)::int AS n FROM unnest($1::text[], $2::text[], $3::text[]) AS x(t, s, k)
                   GROUP BY t, s, k) AS u
             WHERE e.tenant_id = u.t AND e.source_id = u.s AND e.key = u.k
             RETURNING e.tenant_id, e.source_id, e.key, e.id",
            &[&col(|r| &r.tenant_id), &col(|r| &r.source_id), &col(|r| &r.key)],
        )
        .await?;
    let ids: std::collections::HashMap<(String, String, String), String> =
        found.iter().map(|r| ((r.get(0), r.get(1), r.get(2)), r.get(3))).collect();
    Ok(rows.iter().map(|r| ids.get(&(r.tenant_id.clone(), r.source_id.clone(), r.key.clone())).cloned()).collect())
}
