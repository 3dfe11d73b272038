//! The `endpoint_auth` table: an endpoint's OAuth client, client certificate and
//! server CA, and the access token its workers share.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::{AppId, EndpointId, TenantId};

/// An endpoint's authentication settings, as stored (secrets sealed).
#[derive(Debug, Clone, Default)]
pub struct AuthRow {
    /// The OAuth client's settings without its secrets; `None`: no OAuth.
    pub oauth: Option<Value>,
    /// Sealed: the client secret, refresh token and JWT key.
    pub oauth_secrets: Option<Vec<u8>>,
    /// Sealed: the PEM key and certificate chain.
    pub mtls_identity: Option<Vec<u8>>,
    /// PEM: the roots the endpoint's certificate must chain to.
    pub server_ca: Option<String>,
    /// The endpoint's `auth_at`.
    pub changed_at: DateTime<Utc>,
    /// When the OAuth client last changed: what its tokens are kept under.
    pub oauth_at: Option<DateTime<Utc>>,
}

/// One part of the settings, replaced (or, with `None`, removed) on its own.
pub enum Change<'a> {
    Oauth(Option<(&'a Value, &'a [u8])>),
    Mtls(Option<&'a [u8]>),
    Ca(Option<&'a str>),
}

/// The settings, if the endpoint has any.
pub async fn get(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
) -> Result<Option<AuthRow>, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let row = db
        .query_opt(
            "SELECT oauth, oauth_secrets, mtls_identity, server_ca, changed_at, oauth_at FROM endpoint_auth
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3",
            &[&t, &a, &e],
        )
        .await?;
    Ok(row.map(|r| AuthRow {
        oauth: r.get("oauth"),
        oauth_secrets: r.get("oauth_secrets"),
        mtls_identity: r.get("mtls_identity"),
        server_ca: r.get("server_ca"),
        changed_at: r.get("changed_at"),
        oauth_at: r.get("oauth_at"),
    }))
}

/// Applies one change, in a transaction of the caller's: the endpoint's row is
/// locked first (so a deletion racing it ends one way or the other, never in a
/// foreign-key error), and the endpoint's `auth_at` follows. A change of the OAuth
/// client drops the token held (it was fetched for the old client) and moves
/// `oauth_at`, which fences tokens; a change of the certificate or CA leaves them.
/// `changed_at` only ever grows (a database clock stepped back cannot make a
/// change look older than the one before, which workers would keep).
pub async fn change(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    change: Change<'_>,
) -> Result<bool, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let locked = db
        .query_opt(
            "SELECT 1 FROM endpoints WHERE tenant_id = $1 AND app_id = $2 AND id = $3 FOR NO KEY UPDATE",
            &[&t, &a, &e],
        )
        .await?;
    if locked.is_none() {
        return Ok(false);
    }
    // Fixed statements, one per part: nothing of the caller's is spliced in.
    const NEXT: &str = "changed_at = GREATEST(clock_timestamp(), endpoint_auth.changed_at + interval '1 microsecond')";
    const RESET: &str = "token = NULL, token_fetched_at = NULL, token_expires_at = NULL, token_fetching_until = NULL,
        token_error = NULL, token_error_at = NULL,
        oauth_at = GREATEST(clock_timestamp(), endpoint_auth.oauth_at + interval '1 microsecond')";
    const DONE: &str =
        "RETURNING changed_at, (oauth IS NULL AND mtls_identity IS NULL AND server_ca IS NULL) AS is_empty";
    let row = match change {
        Change::Oauth(v) => {
            let (oauth, secrets) = (v.map(|v| v.0), v.map(|v| v.1));
            let sql = format!(
                "INSERT INTO endpoint_auth (tenant_id, app_id, endpoint_id, oauth, oauth_secrets, changed_at, oauth_at)
                 VALUES ($1, $2, $3, $4, $5, clock_timestamp(), clock_timestamp())
                 ON CONFLICT (tenant_id, app_id, endpoint_id) DO UPDATE
                 SET oauth = EXCLUDED.oauth, oauth_secrets = EXCLUDED.oauth_secrets, {RESET}, {NEXT} {DONE}"
            );
            db.query_one(&sql, &[&t, &a, &e, &oauth, &secrets]).await?
        }
        Change::Mtls(identity) => {
            let sql = format!(
                "INSERT INTO endpoint_auth (tenant_id, app_id, endpoint_id, mtls_identity, changed_at)
                 VALUES ($1, $2, $3, $4, clock_timestamp())
                 ON CONFLICT (tenant_id, app_id, endpoint_id) DO UPDATE
                 SET mtls_identity = EXCLUDED.mtls_identity, {NEXT} {DONE}"
            );
            db.query_one(&sql, &[&t, &a, &e, &identity]).await?
        }
        Change::Ca(ca) => {
            let sql = format!(
                "INSERT INTO endpoint_auth (tenant_id, app_id, endpoint_id, server_ca, changed_at)
                 VALUES ($1, $2, $3, $4, clock_timestamp())
                 ON CONFLICT (tenant_id, app_id, endpoint_id) DO UPDATE
                 SET server_ca = EXCLUDED.server_ca, {NEXT} {DONE}"
            );
            db.query_one(&sql, &[&t, &a, &e, &ca]).await?
        }
    };
    let (at, empty): (DateTime<Utc>, bool) = (row.get("changed_at"), row.get("is_empty"));
    if empty {
        db.execute(
            "DELETE FROM endpoint_auth WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3",
            &[&t, &a, &e],
        )
        .await?;
    }
    let marker = (!empty).then_some(at);
    db.execute(
        "UPDATE endpoints SET auth_at = $4, updated_at = now() WHERE tenant_id = $1 AND app_id = $2 AND id = $3",
        &[&t, &a, &e, &marker],
    )
    .await?;
    Ok(true)
}

/// The token held for the OAuth client of `at` (its `oauth_at`), as the workers share it.
#[derive(Debug, Clone)]
pub struct TokenState {
    /// Sealed, with when it was fetched and when it expires.
    pub token: Option<(Vec<u8>, DateTime<Utc>, DateTime<Utc>)>,
    /// Another process is fetching one (or the last fetch failed and the next may
    /// not be made yet).
    pub fetching: bool,
    /// Why the last fetch failed, while no other may be made.
    pub error: Option<String>,
    /// The sealed secrets as they are now: a refresh token the server rotated is
    /// read here, not from settings read before.
    pub secrets: Option<Vec<u8>>,
}

/// The token state, if the OAuth client is still that of `at` (`None`: it changed).
pub async fn token_state(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
) -> Result<Option<TokenState>, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let row = db
        .query_opt(
            "SELECT token, token_fetched_at, token_expires_at,
                    COALESCE(token_fetching_until > now(), false) AS fetching, token_error, oauth_secrets
             FROM endpoint_auth WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4",
            &[&t, &a, &e, &at],
        )
        .await?;
    Ok(row.map(|r| {
        let token: Option<Vec<u8>> = r.get("token");
        let (fetched, expires): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
            (r.get("token_fetched_at"), r.get("token_expires_at"));
        let fetching: bool = r.get("fetching");
        TokenState {
            token: token.zip(fetched).zip(expires).map(|((t, f), e)| (t, f, e)),
            fetching,
            error: if fetching { r.get("token_error") } else { None },
            secrets: r.get("oauth_secrets"),
        }
    }))
}

/// Takes the right to fetch a token for `lease`, and answers the state as it is
/// once taken (a token another process stored since the caller looked, and the
/// secrets as they are now, a rotated refresh token included); `None` when another
/// process holds it (or a failure's pause is not over), or the client changed.
pub async fn take_fetch(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
    lease: std::time::Duration,
) -> Result<Option<TokenState>, StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let ms = lease.as_millis() as f64;
    let row = db
        .query_opt(
            "UPDATE endpoint_auth SET token_fetching_until = now() + make_interval(secs => $5::float8 / 1000),
                 token_error = NULL, token_error_at = NULL
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4
               AND (token_fetching_until IS NULL OR token_fetching_until <= now())
             RETURNING token, token_fetched_at, token_expires_at, oauth_secrets",
            &[&t, &a, &e, &at, &ms],
        )
        .await?;
    Ok(row.map(|r| {
        let token: Option<Vec<u8>> = r.get("token");
        let (fetched, expires): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
            (r.get("token_fetched_at"), r.get("token_expires_at"));
        TokenState {
            token: token.zip(fetched).zip(expires).map(|((t, f), e)| (t, f, e)),
            fetching: false,
            error: None,
            secrets: r.get("oauth_secrets"),
        }
    }))
}

/// Gives back the right to fetch, unused (a token another process stored since
/// will do).
pub async fn release_fetch(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    db.execute(
        "UPDATE endpoint_auth SET token_fetching_until = NULL
         WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4",
        &[&t, &a, &e, &at],
    )
    .await?;
    Ok(())
}

/// A token just fetched, sealed.
pub struct Fetched<'a> {
    pub token: &'a [u8],
    pub fetched: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    /// The secrets with the refresh token the server rotated, sealed, if it did.
    pub secrets: Option<&'a [u8]>,
}

/// Keeps a token fetched for the OAuth client of `at` (dropped if it changed since).
pub async fn store_token(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
    f: &Fetched<'_>,
) -> Result<bool, StoreError> {
    let Fetched { token, fetched, expires, secrets } = f;
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let n = db
        .execute(
            "UPDATE endpoint_auth SET token = $5, token_fetched_at = $6, token_expires_at = $7,
                 oauth_secrets = COALESCE($8, oauth_secrets),
                 token_fetching_until = NULL, token_error = NULL, token_error_at = NULL
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4",
            &[&t, &a, &e, &at, &token, &fetched, &expires, &secrets],
        )
        .await?;
    Ok(n == 1)
}

/// Records a failed fetch: no process fetches again for `pause`, and attempts
/// meanwhile fail with `reason`.
pub async fn store_failure(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
    reason: &str,
    pause: std::time::Duration,
) -> Result<(), StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    let ms = pause.as_millis() as f64;
    db.execute(
        "UPDATE endpoint_auth SET token_error = $5, token_error_at = now(),
             token_fetching_until = now() + make_interval(secs => $6::float8 / 1000)
         WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4",
        &[&t, &a, &e, &at, &reason, &ms],
    )
    .await?;
    Ok(())
}

/// Drops the token the endpoint refused (401), if it is still the one held.
pub async fn drop_token(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    at: DateTime<Utc>,
    token: &[u8],
) -> Result<(), StoreError> {
    let (t, a, e) = (tenant.as_str(), app.as_str(), ep.as_str());
    db.execute(
        "UPDATE endpoint_auth SET token = NULL, token_fetched_at = NULL, token_expires_at = NULL
         WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND oauth_at = $4 AND token = $5",
        &[&t, &a, &e, &at, &token],
    )
    .await?;
    Ok(())
}
