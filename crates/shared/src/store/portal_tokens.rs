//! App-portal tokens refused before they expire (`portal_revocations`): an
//! application's tokens expired all at once or by session (`expire-all`), and
//! one token logged out. Tokens themselves are signed, never stored.

use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{AppId, TenantId};

/// The longest a token of an application lives (a message token's five years;
/// portal links' 30 days, poller tokens' year): a revocation older than this
/// refuses nothing, and only then is it pruned.
pub const LONGEST_TOKEN_MS: i64 = 5 * 365 * 86_400 * 1000;

/// The session a logout refuses: that one token, by its id.
pub fn logged_out(token_id: &str) -> String {
    format!("tok:{token_id}")
}

/// Refuses, from `effective_at_ms` on, the application's tokens made before
/// `issued_before_ms` whose session is one of `sessions` ('' every token). An
/// application gone meanwhile has no tokens left to refuse: nothing is written
/// (its row is held while the rows go in, so a deletion waits or went first).
pub async fn revoke(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sessions: &[String],
    issued_before_ms: i64,
    effective_at_ms: i64,
    caches: &impl super::Forget,
) -> Result<(), StoreError> {
    db.execute(
        "WITH app AS (SELECT 1 FROM applications WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE)
         INSERT INTO portal_revocations (tenant_id, app_id, session, issued_before, effective_at)
         SELECT $1, $2, s, $4, $5 FROM unnest($3::text[]) AS s, app
         ON CONFLICT (tenant_id, app_id, session, issued_before)
             DO UPDATE SET effective_at = LEAST(portal_revocations.effective_at, EXCLUDED.effective_at)",
        &[&tenant.as_str(), &app.as_str(), &sessions, &issued_before_ms, &effective_at_ms],
    )
    .await?;
    caches.forget_portal_tokens();
    Ok(())
}

/// Whether a token of the application, of `session` ('' none) and with id
/// `token_id`, made at `issued_ms`, is refused at `now_ms`.
pub async fn is_revoked(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &str,
    session: &str,
    token_id: &str,
    issued_ms: i64,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let row = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM portal_revocations
                WHERE tenant_id = $1 AND app_id = $2 AND session = ANY ($3::text[])
                  AND issued_before > $4 AND effective_at <= $5)",
            &[
                &tenant.as_str(),
                &app,
                &vec!["".to_owned(), session.to_owned(), logged_out(token_id)],
                &issued_ms,
                &now_ms,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// Removes up to `limit` revocations, of every tenant, older than any token they
/// could refuse; how many.
pub async fn prune(db: &impl GenericClient, now_ms: i64, limit: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM portal_revocations WHERE (tenant_id, app_id, session, issued_before) IN (
                SELECT tenant_id, app_id, session, issued_before FROM portal_revocations
                WHERE issued_before < $1 LIMIT $2)",
            &[&(now_ms - LONGEST_TOKEN_MS), &limit],
        )
        .await?;
    Ok(n)
}
