//! Pruning past retention, row by row, for what a partition drop does not take.
//!
//! Most rows go with their partition ([`super::partitions`]): a partition is
//! dropped once its newest row is past the family's horizon, the longest
//! retention any tenant (or source) has. Rows whose own retention is shorter than
//! that horizon are deleted here, at their own horizon, and so are the narrow key
//! rows that hold the dedupe decisions (`inbound_keys`: the dedupe window ends
//! exactly; `message_request_keys`: the Idempotency-Key's day).
//!
//! Every call removes at most `batch` rows, reads only the rows it removes
//! (per-tenant or per-source index ranges), and skips rows another pruner holds,
//! so any number of instances may prune at once and no lock is held for long.
//! Callers repeat a call until it returns less than `batch`. Rows of a
//! partitioned table are chosen (and locked) first and then removed by key, in
//! one transaction, with their ids listed so that the removal plans only the
//! partitions that hold them.

use tokio_postgres::{GenericClient, Row};

use super::StoreError;

/// Column `name` of `rows`, as text: the keys a first statement chose, for the
/// statement that removes them.
pub(super) fn column(rows: &[Row], name: &str) -> Vec<String> {
    rows.iter().map(|r| r.get::<_, String>(name)).collect()
}

/// Inbound keys past their dedupe window (their source's retention, else their
/// tenant's, else `default_days`): a provider's copy of such a key is a new
/// event from then on. A key whose event is a sync forward in flight (its lease
/// running) stays until the lease ends.
pub async fn prune_inbound_keys(db: &impl GenericClient, default_days: i32, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM inbound_keys k USING (
                SELECT x.tenant_id, x.source_id, x.key FROM sources s JOIN tenants t ON t.id = s.tenant_id
                CROSS JOIN LATERAL (
                    SELECT k.tenant_id, k.source_id, k.key FROM inbound_keys k
                    WHERE k.tenant_id = s.tenant_id AND k.source_id = s.id
                      AND k.received_at < now() - make_interval(days => COALESCE(s.retention_days, t.inbound_days, $2))
                      AND NOT EXISTS (SELECT 1 FROM inbound_events e
                          WHERE e.tenant_id = k.tenant_id AND e.source_id = k.source_id AND e.id = k.event_id
                            AND e.status = 'processing' AND e.lease_until >= now())
                    ORDER BY k.received_at LIMIT $1 FOR UPDATE OF k SKIP LOCKED
                ) x
                LIMIT $1
             ) doomed
             WHERE k.tenant_id = doomed.tenant_id AND k.source_id = doomed.source_id AND k.key = doomed.key",
            &[&batch, &default_days],
        )
        .await?;
    Ok(n)
}

/// Inbound events of sources whose retention is shorter than `horizon_days` (the
/// longest any source has: the others' events go with their partition), once
/// past it. A `processing` event stays while its lease runs.
pub async fn prune_inbound_events(
    db: &mut impl GenericClient,
    default_days: i32,
    horizon_days: i32,
    batch: i64,
) -> Result<u64, StoreError> {
    let tx = db.transaction().await?;
    let rows = tx
        .query(
            "SELECT x.tenant_id, x.source_id, x.id FROM sources s JOIN tenants t ON t.id = s.tenant_id
             CROSS JOIN LATERAL (
                 SELECT e.tenant_id, e.source_id, e.id FROM inbound_events e
                 WHERE e.tenant_id = s.tenant_id AND e.source_id = s.id
                   -- By the id (made when the event was received): the primary key's
                   -- order, and whole partitions skipped.
                   AND e.id < hookgate_id_floor('evt', now() - make_interval(days => COALESCE(s.retention_days, t.inbound_days, $2)))
                   AND (e.status <> 'processing' OR e.lease_until < now())
                 LIMIT $1 FOR UPDATE OF e SKIP LOCKED
             ) x
             WHERE COALESCE(s.retention_days, t.inbound_days, $2) < $3
             LIMIT $1",
            &[&batch, &default_days, &horizon_days],
        )
        .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let (tenants, sources, ids) = (column(&rows, "tenant_id"), column(&rows, "source_id"), column(&rows, "id"));
    let n = tx
        .execute(
            "DELETE FROM inbound_events e USING unnest($1::text[], $2::text[], $3::text[]) AS d(t, s, i)
             WHERE e.id = ANY ($3) AND e.tenant_id = d.t AND e.source_id = d.s AND e.id = d.i",
            &[&tenants, &sources, &ids],
        )
        .await?;
    tx.commit().await?;
    Ok(n)
}

/// Messages of tenants whose retention is shorter than `horizon_days` (the
/// longest any tenant has: the others' go with their partition), once past it,
/// with their deliveries, attempts and eventId. A message with a delivery in
/// flight (a worker holds it) waits for the attempt to be recorded.
pub async fn prune_messages(
    db: &mut impl GenericClient,
    default_days: i32,
    horizon_days: i32,
    batch: i64,
) -> Result<u64, StoreError> {
    let tx = db.transaction().await?;
    let rows = tx
        .query(
            "SELECT x.tenant_id, x.app_id, x.id FROM tenants t
             CROSS JOIN LATERAL (
                 SELECT m.tenant_id, m.app_id, m.id FROM messages m
                 WHERE m.tenant_id = t.id
                   AND m.created_at < now() - make_interval(days => COALESCE(t.message_days, $2))
                   AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = m.tenant_id
                       AND d.app_id = m.app_id AND d.msg_id = m.id AND d.status = 1 AND d.lease_token IS NOT NULL)
                 ORDER BY m.created_at LIMIT $1 FOR UPDATE OF m SKIP LOCKED
             ) x
             WHERE COALESCE(t.message_days, $2) < $3
             LIMIT $1",
            &[&batch, &default_days, &horizon_days],
        )
        .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let n = delete_messages(&tx, &column(&rows, "tenant_id"), &column(&rows, "app_id"), &column(&rows, "id")).await?;
    tx.commit().await?;
    Ok(n)
}

/// Deletes messages given by key, with their deliveries, attempts, eventIds and request keys,
/// in one statement; the ids listed bound each partitioned table to the
/// partitions that hold them. Returns how many messages went.
pub(super) async fn delete_messages(
    db: &impl GenericClient,
    tenants: &[String],
    apps: &[String],
    ids: &[String],
) -> Result<u64, StoreError> {
    let row = db
        .query_one(
            "WITH doomed AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS d(t, a, m)
             ), deliveries AS (
                DELETE FROM deliveries x USING doomed
                WHERE x.msg_id = ANY ($3) AND x.tenant_id = doomed.t AND x.app_id = doomed.a AND x.msg_id = doomed.m
             ), attempts AS (
                DELETE FROM attempts x USING doomed
                WHERE x.msg_id = ANY ($3) AND x.tenant_id = doomed.t AND x.app_id = doomed.a AND x.msg_id = doomed.m
             ), event_ids AS (
                DELETE FROM message_event_ids x USING doomed
                WHERE x.tenant_id = doomed.t AND x.app_id = doomed.a AND x.msg_id = doomed.m
             ), request_keys AS (
                DELETE FROM message_request_keys x USING doomed
                WHERE x.tenant_id = doomed.t AND x.app_id = doomed.a AND x.msg_id = doomed.m
             ), gone AS (
                DELETE FROM messages x USING doomed
                WHERE x.id = ANY ($3) AND x.tenant_id = doomed.t AND x.app_id = doomed.a AND x.id = doomed.m
                RETURNING 1
             )
             SELECT count(*) FROM gone",
            &[&tenants, &apps, &ids],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Drops the payloads whose `payloadRetentionPeriod` has passed; the messages stay.
/// The lock is the one such an update needs: a worker recording an attempt holds
/// its message's key (`FOR KEY SHARE`), which does not stop this.
pub async fn expire_payloads(db: &mut impl GenericClient, batch: i64) -> Result<u64, StoreError> {
    let tx = db.transaction().await?;
    let rows = tx
        .query(
            "SELECT tenant_id, app_id, id FROM messages WHERE payload_expires_at < now() AND payload IS NOT NULL
             ORDER BY payload_expires_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED",
            &[&batch],
        )
        .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let n = tx
        .execute(
            "UPDATE messages m SET payload = NULL FROM unnest($1::text[], $2::text[], $3::text[]) AS d(t, a, i)
             WHERE m.id = ANY ($3) AND m.tenant_id = d.t AND m.app_id = d.a AND m.id = d.i",
            &[&column(&rows, "tenant_id"), &column(&rows, "app_id"), &column(&rows, "id")],
        )
        .await?;
    tx.commit().await?;
    Ok(n)
}

/// The `Idempotency-Key`s that created messages, past their lifetime (`ttl`):
/// a request with one runs again as a new one.
pub async fn prune_request_keys(
    db: &impl GenericClient,
    ttl: std::time::Duration,
    batch: i64,
) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM message_request_keys r USING (
                SELECT tenant_id, app_id, key FROM message_request_keys
                WHERE created_at < now() - make_interval(secs => $1)
                ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
             ) doomed
             WHERE r.tenant_id = doomed.tenant_id AND r.app_id = doomed.app_id AND r.key = doomed.key",
            &[&ttl.as_secs_f64(), &batch],
        )
        .await?;
    Ok(n)
}

/// After a message partition `[from, to)` was dropped: the eventIds of the
/// messages it held, in bounded batches.
pub async fn prune_event_ids_below(db: &impl GenericClient, to: &str, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM message_event_ids k USING (
                SELECT tenant_id, app_id, event_id FROM message_event_ids
                WHERE msg_id < $1 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = msg_id
                    AND m.tenant_id = message_event_ids.tenant_id AND m.app_id = message_event_ids.app_id)
                LIMIT $2 FOR UPDATE SKIP LOCKED
             ) doomed
             WHERE k.tenant_id = doomed.tenant_id AND k.app_id = doomed.app_id AND k.event_id = doomed.event_id",
            &[&to, &batch],
        )
        .await?;
    Ok(n)
}
