//! The `poller_tokens` table: which generation of a polling endpoint's token is
//! current, which one before it still works and until when (the tokens themselves
//! are signed, never stored).

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{ApiKeyId, AppId, EndpointId, TenantId};

/// The current token's generation and what it is minted from.
#[derive(Debug, Clone)]
pub struct PollerToken {
    pub generation: i32,
    pub key: ApiKeyId,
    pub issued_ms: i64,
    pub expires_at: DateTime<Utc>,
}

/// The endpoint's current token, if one was ever made.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<Option<PollerToken>, StoreError> {
    let row = db
        .query_opt(
            "SELECT generation, key_id, issued_ms, expires_at FROM poller_tokens
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str()],
        )
        .await?;
    Ok(row.map(|r| PollerToken {
        generation: r.get("generation"),
        key: ApiKeyId::from_db(r.get("key_id")),
        issued_ms: r.get("issued_ms"),
        expires_at: r.get("expires_at"),
    }))
}

/// Makes the next generation current (the first, if there was none), made by
/// `key`; the one before keeps working for `old_grace` (none if zero). Only if
/// the current generation is still `seen` (`None`: there is none), so two callers
/// that saw the same one make one new generation between them, not two (the
/// second would end the first's at once): `None` then, and the caller reads what
/// is current. Run it in a transaction: the endpoint's row is locked first (and
/// must still be a polling endpoint), so a deletion racing it ends one way or the other.
#[allow(clippy::too_many_arguments)]
pub async fn rotate(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    seen: Option<i32>,
    key: &ApiKeyId,
    expires_at: DateTime<Utc>,
    old_grace: std::time::Duration,
) -> Result<Rotated, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let locked = db
        .query_opt(
            "SELECT 1 FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 AND kind = $4 FOR NO KEY UPDATE",
            &[&t, &a, &e, &crate::status::EndpointKind::PollingEndpoint.code()],
        )
        .await?;
    if locked.is_none() {
        return Ok(Rotated::Gone);
    }
    let issued_ms = Utc::now().timestamp_millis();
    let grace_ms = old_grace.as_millis() as f64;
    let row = match seen {
        None => {
            db.query_opt(
                "INSERT INTO poller_tokens (tenant_id, app_id, endpoint_id, generation, key_id, issued_ms, expires_at)
                 VALUES ($1, $2, $3, 1, $4, $5, $6)
                 ON CONFLICT (tenant_id, app_id, endpoint_id) DO NOTHING
                 RETURNING generation",
                &[&t, &a, &e, &key.as_str(), &issued_ms, &expires_at],
            )
            .await?
        }
        Some(seen) => {
            db.query_opt(
                "UPDATE poller_tokens
                 SET generation = generation + 1, key_id = $4, issued_ms = $5, expires_at = $6,
                     old_generation = generation,
                     old_until = LEAST(expires_at, now() + make_interval(secs => $7::float8 / 1000))
                 WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND generation = $8
                 RETURNING generation",
                &[&t, &a, &e, &key.as_str(), &issued_ms, &expires_at, &grace_ms, &seen],
            )
            .await?
        }
    };
    Ok(match row {
        Some(r) => Rotated::Made(PollerToken { generation: r.get(0), key: key.clone(), issued_ms, expires_at }),
        None => Rotated::Raced,
    })
}

/// What a rotation did.
#[derive(Debug)]
pub enum Rotated {
    Made(PollerToken),
    /// Another caller made a new generation first: read what is current.
    Raced,
    /// The endpoint is gone, or is no polling endpoint now.
    Gone,
}

/// Whether generation `generation` of the endpoint's token works now: the current
/// one until it expires, the one before until its grace ends.
pub async fn is_live(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    generation: i32,
) -> Result<bool, StoreError> {
    let row = db
        .query_opt(
            "SELECT 1 FROM poller_tokens
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3
               AND ((generation = $4 AND expires_at > now()) OR (old_generation = $4 AND old_until > now()))",
            &[&tenant.as_str(), &app.as_str(), &ep.as_str(), &generation],
        )
        .await?;
    Ok(row.is_some())
}
