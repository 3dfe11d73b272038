//! Pruning past retention, and erasing content on request.
//!
//! Every pruning call removes at most `batch` rows, reads only the rows it removes
//! (per-tenant or per-source index ranges, never a scan of the table), and skips
//! rows another pruner holds, so any number of instances may prune at once and no
//! lock is held for long. Callers repeat a call until it returns less than `batch`.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::{
    cache::Caches,
    ids::{AppId, AttemptId, MessageId, TenantId},
};

/// Inbound events older than their source's retention (else its tenant's, else
/// `default_days`): the end of their dedupe window. A `processing` row (a sync
/// forward in flight) stays while its lease runs; abandoned, it goes too.
pub async fn prune_inbound(db: &impl GenericClient, default_days: i32, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM inbound_events WHERE ctid IN (
                SELECT x.ctid FROM sources s JOIN tenants t ON t.id = s.tenant_id
                CROSS JOIN LATERAL (
                    SELECT e.ctid FROM inbound_events e
                    WHERE e.tenant_id = s.tenant_id AND e.source_id = s.id
                      AND e.received_at < now() - make_interval(days => COALESCE(s.retention_days, t.inbound_days, $2))
                      AND (e.status <> 'processing' OR e.lease_until < now())
                    LIMIT $1 FOR UPDATE OF e SKIP LOCKED
                ) x
                LIMIT $1)",
            &[&batch, &default_days],
        )
        .await?;
    Ok(n)
}

/// Messages older than their tenant's retention (else `default_days`), with their
/// deliveries and attempts (by cascade). A message with a delivery in flight (a
/// worker holds it) waits for the attempt to be recorded.
pub async fn prune_messages(db: &impl GenericClient, default_days: i32, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM messages m USING (
                SELECT x.tenant_id, x.app_id, x.id FROM tenants t
                CROSS JOIN LATERAL (
                    SELECT m.tenant_id, m.app_id, m.id FROM messages m
                    WHERE m.tenant_id = t.id
                      AND m.created_at < now() - make_interval(days => COALESCE(t.message_days, $2))
                      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = m.tenant_id
                          AND d.app_id = m.app_id AND d.msg_id = m.id AND d.status = 3)
                    ORDER BY m.created_at LIMIT $1 FOR UPDATE OF m SKIP LOCKED
                ) x
                LIMIT $1
             ) doomed
             WHERE m.tenant_id = doomed.tenant_id AND m.app_id = doomed.app_id AND m.id = doomed.id",
            &[&batch, &default_days],
        )
        .await?;
    Ok(n)
}

/// Drops the payloads whose `payloadRetentionPeriod` has passed; the messages stay.
/// The lock is the one such an update needs: a worker recording an attempt holds
/// its message's key (`FOR KEY SHARE`), which does not stop this.
pub async fn expire_payloads(db: &impl GenericClient, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "UPDATE messages SET payload = NULL WHERE ctid IN (
                SELECT ctid FROM messages WHERE payload_expires_at < now() AND payload IS NOT NULL
                ORDER BY payload_expires_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED)",
            &[&batch],
        )
        .await?;
    Ok(n)
}

/// Erases a message's payload, and the inbound event's copy of it when ingress
/// created the message. The rows stay (the message reads `{"expired": true}`).
/// Returns whether the message exists.
pub async fn expunge_message(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "WITH m AS (
                UPDATE messages SET payload = NULL, payload_expires_at = NULL
                WHERE tenant_id = $1 AND app_id = $2 AND id = $3
                RETURNING tenant_id, id, event_id
             ), inbound AS (
                UPDATE inbound_events e SET payload = NULL FROM m
                WHERE e.tenant_id = m.tenant_id AND e.msg_id = m.id AND e.id = m.event_id
                  AND e.source_id IN (SELECT s.id FROM sources s WHERE s.tenant_id = $1)
             )
             SELECT count(*) FROM m",
            &[&tenant.as_str(), &app.as_str(), &msg.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>(0) == 1)
}

/// What an expunged attempt's response reads, as Svix writes it.
pub const EXPUNGED: &str = "EXPUNGED";

/// Erases the response body an endpoint returned to one attempt.
pub async fn expunge_attempt(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    msg: &MessageId,
    attempt: &AttemptId,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE attempts SET response = $5 WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND id = $4",
            &[&tenant.as_str(), &app.as_str(), &msg.as_str(), &attempt.as_str(), &EXPUNGED],
        )
        .await?;
    Ok(n == 1)
}

/// Where the erasure of an application stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erasure {
    /// Rows were removed; more remain.
    Progress(u64),
    /// The application and everything under it are gone.
    Done,
}

/// Records that an application is to be erased, so that the pruners finish what
/// the request does not, and retires it at once: its uid is freed (a new
/// application may take it and is not erased with this one), its sources stop
/// admitting and its endpoints stop receiving.
pub async fn request_erasure(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    caches: &Caches,
) -> Result<(), StoreError> {
    db.execute(
        "WITH app AS (
            UPDATE applications SET uid = NULL, updated_at = now() WHERE tenant_id = $1 AND id = $2
         ), src AS (
            UPDATE sources SET disabled = true, updated_at = now() WHERE tenant_id = $1 AND app_id = $2
         ), eps AS (
            UPDATE endpoints SET disabled = true, updated_at = now() WHERE tenant_id = $1 AND app_id = $2
         )
         INSERT INTO erasures (tenant_id, app_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&tenant.as_str(), &app.as_str()],
    )
    .await?;
    caches.forget_sources();
    Ok(())
}

/// One bounded step of erasing an application: up to `batch` of its messages
/// (with their deliveries and attempts), then up to `batch` of its inbound events
/// (whichever source admitted them); when a step finds less than a batch of
/// either, the application itself goes (its endpoints, sources and the rest of
/// its messages with it, by cascade) with its erasure record.
pub async fn erase_step(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    batch: i64,
    caches: &Caches,
) -> Result<Erasure, StoreError> {
    let (t, a) = (tenant.as_str(), app.as_str());
    let messages = db
        .execute(
            "DELETE FROM messages WHERE ctid IN (
                SELECT ctid FROM messages WHERE tenant_id = $1 AND app_id = $2 LIMIT $3 FOR UPDATE SKIP LOCKED)",
            &[&t, &a, &batch],
        )
        .await?;
    let inbound = db
        .execute(
            "DELETE FROM inbound_events WHERE ctid IN (
                SELECT ctid FROM inbound_events WHERE tenant_id = $1 AND app_id = $2
                LIMIT $3 FOR UPDATE SKIP LOCKED)",
            &[&t, &a, &batch],
        )
        .await?;
    if messages == batch as u64 || inbound == batch as u64 {
        return Ok(Erasure::Progress(messages + inbound));
    }
    // Less than a batch is left (even if more trickles in): one statement takes it.
    db.execute(
        "WITH app AS (DELETE FROM applications WHERE tenant_id = $1 AND id = $2),
              inbound AS (DELETE FROM inbound_events WHERE tenant_id = $1 AND app_id = $2)
         DELETE FROM erasures WHERE tenant_id = $1 AND app_id = $2",
        &[&t, &a],
    )
    .await?;
    // Its sources went with it.
    caches.forget_sources();
    Ok(Erasure::Done)
}

/// How many erasures are requested and not finished.
pub async fn erasures_pending(db: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(db.query_one("SELECT count(*) FROM erasures", &[]).await?.get(0))
}

/// Erasures requested and not finished, oldest first, for the pruners.
pub async fn pending_erasures(db: &impl GenericClient, limit: i64) -> Result<Vec<(TenantId, AppId)>, StoreError> {
    let rows = db.query("SELECT tenant_id, app_id FROM erasures ORDER BY requested_at LIMIT $1", &[&limit]).await?;
    Ok(rows.iter().map(|r| (TenantId::from_db(r.get(0)), AppId::from_db(r.get(1)))).collect())
}

/// What the retention gauges show for one family.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyStats {
    pub family: &'static str,
    /// Postgres's estimate (`reltuples`), cheap at any size; -1 before the first
    /// analyze.
    pub rows: i64,
    /// Table, indexes and TOAST.
    pub bytes: i64,
    /// Unix time of the oldest row kept, if any.
    pub oldest: Option<f64>,
    /// How long the most overdue row has been past its retention (pruning lag), in seconds.
    pub overdue: f64,
}

/// Sizes, oldest rows and pruning lag of the families that have a retention.
/// Every lookup is an index probe per tenant or source, never a scan.
pub async fn stats(
    db: &impl GenericClient,
    inbound_default: i32,
    message_default: i32,
    idempotency_ttl: std::time::Duration,
) -> Result<Vec<FamilyStats>, StoreError> {
    let row = db
        .query_one(
            "WITH inbound AS (
                SELECT x.o, x.o + make_interval(days => COALESCE(s.retention_days, t.inbound_days, $1)) AS due
                FROM sources s JOIN tenants t ON t.id = s.tenant_id CROSS JOIN LATERAL (
                    SELECT e.received_at AS o FROM inbound_events e WHERE e.tenant_id = s.tenant_id AND e.source_id = s.id
                    ORDER BY e.received_at LIMIT 1) x
             ), messages AS (
                SELECT x.o, x.o + make_interval(days => COALESCE(t.message_days, $2)) AS due
                FROM tenants t CROSS JOIN LATERAL (
                    SELECT m.created_at AS o FROM messages m WHERE m.tenant_id = t.id ORDER BY m.created_at LIMIT 1) x
             ), keys AS (
                SELECT min(created_at) AS o FROM idempotency_keys
             )
             SELECT extract(epoch FROM (SELECT min(o) FROM inbound))::float8,
                    COALESCE(extract(epoch FROM now() - (SELECT min(due) FROM inbound))::float8, 0),
                    extract(epoch FROM (SELECT min(o) FROM messages))::float8,
                    COALESCE(extract(epoch FROM now() - (SELECT min(due) FROM messages))::float8, 0),
                    extract(epoch FROM (SELECT o FROM keys))::float8,
                    COALESCE(extract(epoch FROM now() - (SELECT o FROM keys) - make_interval(secs => $3))::float8, 0)",
            &[&inbound_default, &message_default, &idempotency_ttl.as_secs_f64()],
        )
        .await?;
    let sizes = db
        .query(
            "SELECT c.relname::text, c.reltuples::int8, pg_total_relation_size(c.oid)
             FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
               AND c.relname IN ('inbound_events', 'messages', 'deliveries', 'attempts', 'idempotency_keys')",
            &[],
        )
        .await?;
    let size = |name: &str| {
        sizes
            .iter()
            .find(|r| r.get::<_, String>(0) == name)
            .map(|r| (r.get::<_, i64>(1), r.get::<_, i64>(2)))
            .unwrap_or((0, 0))
    };
    let family = |family: &'static str, oldest: Option<f64>, overdue: Option<f64>| {
        let (rows, bytes) = size(family);
        FamilyStats { family, rows, bytes, oldest, overdue: overdue.unwrap_or(0.0).max(0.0) }
    };
    Ok(vec![
        family("inbound_events", row.get(0), row.get(1)),
        family("messages", row.get(2), row.get(3)),
        family("deliveries", None, None),
        family("attempts", None, None),
        family("idempotency_keys", row.get(4), row.get(5)),
    ])
}
