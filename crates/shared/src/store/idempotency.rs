//! The `idempotency_keys` table behind `Idempotency-Key` on Hookgate's own POSTs.
//!
//! Claiming a key is one `INSERT … ON CONFLICT DO NOTHING`: of two concurrent
//! requests exactly one runs, the other sees the row and answers 409 or replays.

use std::time::Duration;

use tokio_postgres::GenericClient;

use super::StoreError;

/// A finished response kept for replay.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What claiming a key found.
#[derive(Debug)]
pub enum Claim {
    /// This request owns the key, under this fencing token, and must run, then
    /// [`finish`] or [`release`] with the token. With it, the server that took the
    /// claim ([`Server`]), for a finish written later.
    Run(i64, Server),
    /// The same request already ran: replay its response.
    Replay(StoredResponse),
    /// The key was used for another method or path.
    Mismatch,
    /// The first request with this key is still running.
    Running,
}

/// A `running` row older than this belonged to a process that died; it is taken over.
pub const STALE_RUNNING: Duration = Duration::from_secs(60);

/// Claims `key` for the request whose fingerprints are `prints`: the first is
/// stored; a row holding any of them is the same request (the others are the
/// forms earlier releases stored).
pub async fn claim(
    db: &impl GenericClient,
    scope: &str,
    key: &str,
    prints: &[Vec<u8>],
    ttl: Duration,
) -> Result<Claim, StoreError> {
    let fingerprint = &prints[0];
    let ttl_secs = ttl.as_secs_f64();
    let token: i64 = rand::random();
    let stale_secs = STALE_RUNNING.as_secs_f64();
    // Expired keys and abandoned runs are replaced in place rather than deleted
    // first, so that the claim stays one statement. An abandoned run is taken over
    // only by a request to the same path: another path under its key is answered
    // 422, as it would be had the first run finished (its effect may have committed).
    let claimed = db
        .query_opt(
            "INSERT INTO idempotency_keys AS k (tenant_id, key, fingerprint, state, claim_token)
             VALUES ($1, $2, $3, 'running', $6)
             ON CONFLICT (tenant_id, key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, state = 'running', status = NULL,
                    headers = NULL, body = NULL, created_at = now(), claim_token = EXCLUDED.claim_token
                WHERE k.created_at < now() - make_interval(secs => $4)
                   OR (k.state = 'running' AND k.created_at < now() - make_interval(secs => $5)
                       AND k.fingerprint = ANY ($7))
             RETURNING (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint::text",
            &[&scope, &key, &fingerprint, &ttl_secs, &stale_secs, &token, &prints],
        )
        .await?;
    if let Some(row) = claimed {
        return Ok(Claim::Run(token, Server(row.get(0))));
    }
    let row = db
        .query_opt(
            "SELECT fingerprint, state, status, headers, body FROM idempotency_keys
             WHERE tenant_id = $1 AND key = $2",
            &[&scope, &key],
        )
        .await?;
    let Some(row) = row else {
        // Released between our insert and select: the caller may simply retry.
        return Ok(Claim::Running);
    };
    let stored_fp: Vec<u8> = row.get("fingerprint");
    if !prints.iter().any(|p| crate::crypto::secrets_equal(&stored_fp, p)) {
        return Ok(Claim::Mismatch);
    }
    let state: String = row.get("state");
    if state == "running" {
        return Ok(Claim::Running);
    }
    let status: i16 = row.get("status");
    let headers: serde_json::Value = row.get("headers");
    let headers = serde_json::from_value(headers).unwrap_or_default();
    Ok(Claim::Replay(StoredResponse { status: status as u16, headers, body: row.get("body") }))
}

/// Which server instance took a claim: its postmaster's start time (in µs since
/// the epoch, whatever the session's time zone), which a promoted standby does
/// not share. A crash restart keeps it: the answer is then kept there, which is
/// right as long as the server's commits are durable (`fsync`, `synchronous_commit`
/// on), as Hookgate requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server(pub String);

/// Stores the response of a claimed key for later replays, if `token` still
/// holds the claim; false when it was taken over (the successor's stands).
///
/// With `on`, only on that server: a response stored outside the transaction of
/// the effect it answers must not be kept by a server that may lack the effect
/// (a standby promoted after the primary committed it, when replication was not
/// synchronous). False there too.
pub async fn finish(
    db: &impl GenericClient,
    scope: &str,
    key: &str,
    token: i64,
    on: Option<&Server>,
    response: &StoredResponse,
) -> Result<bool, StoreError> {
    let headers = serde_json::to_value(&response.headers).expect("string pairs serialise");
    let server = on.map(|s| s.0.as_str());
    let n = db
        .execute(
            "UPDATE idempotency_keys SET state = 'done', status = $4, headers = $5, body = $6
             WHERE tenant_id = $1 AND key = $2 AND state = 'running' AND claim_token = $3
               AND ($7::text IS NULL
                    OR (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint::text = $7)",
            &[&scope, &key, &token, &(response.status as i16), &headers, &response.body, &server],
        )
        .await?;
    Ok(n == 1)
}

/// Forgets a claimed key whose request failed on our side, so a retry runs again;
/// only while `token` holds the claim.
pub async fn release(db: &impl GenericClient, scope: &str, key: &str, token: i64) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND state = 'running' AND claim_token = $3",
            &[&scope, &key, &token],
        )
        .await?;
    Ok(n == 1)
}

/// Deletes up to `batch` expired keys; the pruner calls it until it returns 0.
pub async fn prune(db: &impl GenericClient, ttl: Duration, batch: i64) -> Result<u64, StoreError> {
    let n = db
        .execute(
            "DELETE FROM idempotency_keys WHERE ctid IN (
                SELECT ctid FROM idempotency_keys
                WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)",
            &[&ttl.as_secs_f64(), &batch],
        )
        .await?;
    Ok(n)
}
