//! Erasing on request: one message's content, one attempt's response, or one
//! customer (an application and everything under it), for GDPR requests. What
//! is erased is gone from the database, not hidden.

use tokio_postgres::GenericClient;

use super::{
    retention::{self, column},
    StoreError,
};
use crate::ids::{AppId, AttemptId, MessageId, TenantId};

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
            "UPDATE attempts SET response = $5, request_headers = NULL WHERE tenant_id = $1 AND app_id = $2 AND msg_id = $3 AND id = $4",
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
    caches: &impl super::Forget,
) -> Result<(), StoreError> {
    db.execute(
        "WITH app AS (
            UPDATE applications SET uid = NULL, updated_at = now() WHERE tenant_id = $1 AND id = $2
         ), src AS (
            UPDATE sources SET disabled = true, updated_at = now() WHERE tenant_id = $1 AND app_id = $2
         ), eps AS (
            UPDATE endpoints SET disabled = true, updated_at = now() WHERE tenant_id = $1 AND app_id = $2
         ), brokers AS (
            -- What its broker sources would publish to it would be erased unseen:
            -- they stop, their messages wait on the broker.
            UPDATE broker_sources SET disabled = true, updated_at = now() WHERE tenant_id = $1 AND app_id = $2
         )
         INSERT INTO erasures (tenant_id, app_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&tenant.as_str(), &app.as_str()],
    )
    .await?;
    caches.forget_sources();
    Ok(())
}

/// One bounded step of erasing an application: up to `batch` of its messages
/// (with their deliveries, attempts and eventIds), then up to `batch` of its
/// inbound events with their keys (whichever source admitted them); when a step
/// finds less than a batch of either, the application itself goes (its
/// endpoints by cascade; its sources, what is left under both, and its erasure
/// record explicitly).
pub async fn erase_step(
    db: &mut impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    batch: i64,
    caches: &impl super::Forget,
) -> Result<Erasure, StoreError> {
    let (t, a) = (tenant.as_str(), app.as_str());
    let tx = db.transaction().await?;
    let rows = tx
        .query(
            "SELECT tenant_id, app_id, id FROM messages WHERE tenant_id = $1 AND app_id = $2
             LIMIT $3 FOR UPDATE SKIP LOCKED",
            &[&t, &a, &batch],
        )
        .await?;
    let messages = if rows.is_empty() {
        0
    } else {
        retention::delete_messages(&tx, &column(&rows, "tenant_id"), &column(&rows, "app_id"), &column(&rows, "id"))
            .await?
    };
    let rows = tx
        .query(
            "SELECT tenant_id, source_id, id, key FROM inbound_events WHERE tenant_id = $1 AND app_id = $2
             LIMIT $3 FOR UPDATE SKIP LOCKED",
            &[&t, &a, &batch],
        )
        .await?;
    let inbound = if rows.is_empty() {
        0
    } else {
        tx.execute(
            "WITH doomed AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS d(t, s, i, k)
             ), keys AS (
                DELETE FROM inbound_keys x USING doomed
                WHERE x.tenant_id = doomed.t AND x.source_id = doomed.s AND x.key = doomed.k AND x.event_id = doomed.i
             )
             DELETE FROM inbound_events x USING doomed
             WHERE x.id = ANY ($3) AND x.tenant_id = doomed.t AND x.source_id = doomed.s AND x.id = doomed.i",
            &[&column(&rows, "tenant_id"), &column(&rows, "source_id"), &column(&rows, "id"), &column(&rows, "key")],
        )
        .await?
    };
    tx.commit().await?;
    if messages == batch as u64 || inbound == batch as u64 {
        return Ok(Erasure::Progress(messages + inbound));
    }
    // Less than a batch is left (even if more trickles in). The application is
    // locked first: that waits for every writer that locked it (`store::parents`;
    // they lock applications before sources, as this does) and for a source being
    // moved into it, and none locks it after. Then, seeing them all, its sources
    // (in id order) and the application go. The last statement, with a later
    // snapshot still, sees every row those writers wrote and takes what is left:
    // the messages, deliveries and attempts, the inbound events admitted for it,
    // and every key and event of its sources (whichever application they were
    // admitted for).
    let tx = db.transaction().await?;
    tx.execute("SELECT 1 FROM applications WHERE tenant_id = $1 AND id = $2 FOR UPDATE", &[&t, &a]).await?;
    let sources: Vec<String> = tx
        .query(
            "WITH src AS (
                DELETE FROM sources WHERE tenant_id = $1 AND id IN (
                    SELECT id FROM sources WHERE tenant_id = $1 AND app_id = $2 ORDER BY id FOR UPDATE)
                RETURNING id
             ), app AS (DELETE FROM applications WHERE tenant_id = $1 AND id = $2)
             SELECT id FROM src",
            &[&t, &a],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    // Keys in two parts, each by an index: those of the sources, and those of the
    // events admitted for it under other sources (an `OR` of the two would read
    // every key of the tenant).
    tx.execute(
        "WITH m AS (DELETE FROM messages WHERE tenant_id = $1 AND app_id = $2),
              d AS (DELETE FROM deliveries WHERE tenant_id = $1 AND app_id = $2),
              att AS (DELETE FROM attempts WHERE tenant_id = $1 AND app_id = $2),
              inbound AS (DELETE FROM inbound_events WHERE tenant_id = $1 AND (app_id = $2 OR source_id = ANY ($3))
                          RETURNING tenant_id, source_id, key, id),
              source_keys AS (DELETE FROM inbound_keys WHERE tenant_id = $1 AND source_id = ANY ($3)),
              event_keys AS (DELETE FROM inbound_keys k USING inbound i WHERE k.tenant_id = i.tenant_id
                          AND k.source_id = i.source_id AND k.key = i.key AND k.event_id = i.id)
         DELETE FROM erasures WHERE tenant_id = $1 AND app_id = $2",
        &[&t, &a, &sources],
    )
    .await?;
    tx.commit().await?;
    // Nothing of it waits now: its wakes go too, in a statement of their own (no
    // lock held with the application's).
    db.execute("DELETE FROM endpoint_wakes WHERE tenant_id = $1 AND app_id = $2", &[&t, &a]).await?;
    // Alerts still queued about it name it and its endpoints' URLs.
    db.execute("DELETE FROM alert_outbox WHERE tenant_id = $1 AND app_id = $2", &[&t, &a]).await?;
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
    Ok(rows.iter().map(|r| (TenantId::from_db(r.get("tenant_id")), AppId::from_db(r.get("app_id")))).collect())
}
