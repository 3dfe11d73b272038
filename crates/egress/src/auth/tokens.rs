//! Access tokens shared by every worker: held in the process while fresh, kept
//! sealed in Postgres for the other processes, fetched by one process at a time
//! and refreshed before they expire, never once per delivery.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    ids::{AppId, EndpointId, TenantId},
    store::endpoint_auth,
    AppState,
};

use super::{oauth, Loaded, OauthSecrets};
use crate::deliver::send::Sender;

/// A token to send, and what identifies it where it is kept.
#[derive(Clone)]
pub struct Bearer {
    pub token: String,
    sealed: Vec<u8>,
    /// The endpoint, and its OAuth client's `oauth_at`, it was fetched for.
    endpoint: EndpointKey,
    at: DateTime<Utc>,
    fetched: DateTime<Utc>,
}

/// Never the token itself.
impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer").field("at", &self.at).field("fetched", &self.fetched).finish_non_exhaustive()
    }
}

/// What an attempt may do about its token.
#[derive(Debug)]
pub enum Got {
    Bearer(Bearer),
    /// Another process is fetching one (or the database cannot say now): not an
    /// attempt; the delivery is due again in a moment.
    Wait,
    /// The token server refused or failed: the attempt fails with this reason.
    Failed(String),
}

#[derive(Debug, Clone)]
struct Held {
    bearer: Bearer,
    expires: DateTime<Utc>,
}

impl Held {
    /// Not yet due for refresh: a quarter of its life, at most a minute, before it expires.
    fn fresh(&self, now: DateTime<Utc>) -> bool {
        let ahead = ((self.expires - self.bearer.fetched) / 4).min(chrono::Duration::seconds(60));
        now < self.expires - ahead
    }

    /// Still good for a request sent now (while another process refreshes it).
    fn valid(&self, now: DateTime<Utc>) -> bool {
        now + chrono::Duration::seconds(2) < self.expires
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Held>>>;

/// Which endpoint: tenant, application, endpoint (the table's key).
pub type EndpointKey = (TenantId, AppId, EndpointId);

/// The process's tokens, one lock per endpoint: deliveries of one endpoint wait
/// for the one fetch in flight rather than each making its own.
#[derive(Default)]
pub struct Tokens {
    slots: Mutex<HashMap<EndpointKey, Slot>>,
    /// When a refused token was last dropped, per endpoint.
    dropped: Mutex<HashMap<EndpointKey, DateTime<Utc>>>,
}

/// How long one process may take to fetch before another may try.
const FETCH_LEASE: Duration = Duration::from_secs(30);
/// After a failed fetch, no process asks again for this long; attempts meanwhile
/// fail with the reason.
const FAILURE_PAUSE: Duration = Duration::from_secs(5);
/// The longest a token request may take.
const LONGEST_FETCH: Duration = Duration::from_secs(10);
/// A refused token (401) is dropped at most this often per endpoint and process:
/// an endpoint that refuses every token does not make every delivery fetch one.
const DROPS_APART: chrono::Duration = chrono::Duration::seconds(30);
/// Endpoints whose lock is kept; past it the map starts again.
const MOST_SLOTS: usize = 10_000;

/// A stored token, opened; `None` if it cannot be (then it is fetched again).
fn opened(state: &AppState, k: &EndpointKey, at: DateTime<Utc>, stored: &StoredToken) -> Option<Held> {
    let (sealed, fetched, expires) = stored;
    let clear = super::open(state, &k.0, &k.1, &k.2, "token", sealed).ok()?;
    let token = String::from_utf8(clear).ok()?;
    let bearer = Bearer { token, sealed: sealed.clone(), endpoint: k.clone(), at, fetched: *fetched };
    Some(Held { bearer, expires: *expires })
}

type StoredToken = (Vec<u8>, DateTime<Utc>, DateTime<Utc>);

/// One database step within the database budget.
async fn step<T, F>(state: &AppState, f: impl FnOnce(db::Client) -> F) -> Result<T, hookgate_shared::store::StoreError>
where
    F: std::future::Future<Output = Result<T, hookgate_shared::store::StoreError>>,
{
    db::bounded(state.db_budget(), async { f(db::conn(&state.db).await?).await }).await
}

impl Tokens {
    fn slot(&self, k: &EndpointKey) -> Slot {
        let mut slots = self.slots.lock().expect("never poisoned");
        if slots.len() >= MOST_SLOTS {
            slots.clear();
        }
        slots.entry(k.clone()).or_default().clone()
    }

    /// The endpoint's token for an attempt that may take `bound` (a fetch takes
    /// part of it); `sender` is the tenant's guarded client.
    pub async fn bearer(
        &self,
        state: &AppState,
        sender: &Sender,
        k: &EndpointKey,
        loaded: &Loaded,
        bound: Duration,
    ) -> Got {
        let (Some((settings, _)), Some(at)) = (&loaded.oauth, loaded.oauth_at) else {
            return Got::Failed("the endpoint has no OAuth client".into());
        };
        let slot = self.slot(k);
        let Ok(mut held) = tokio::time::timeout(bound, slot.lock()).await else { return Got::Wait };
        let now = Utc::now();
        if let Some(h) = held.as_ref().filter(|h| h.bearer.at == at && h.fresh(now)) {
            return Got::Bearer(h.bearer.clone());
        }
        let st = match step(state, |c| async move { endpoint_auth::token_state(&**c, &k.0, &k.1, &k.2, at).await })
            .await
        {
            Ok(Some(st)) => st,
            // Changed since it was read: the next claim reads it again.
            Ok(None) => return Got::Wait,
            Err(e) => {
                tracing::warn!(error = %e, endpoint = %k.2, "the endpoint's token could not be read; delivery waits");
                return Got::Wait;
            }
        };
        let stored = st.token.as_ref().and_then(|t| opened(state, k, at, t));
        if let Some(h) = stored.as_ref().filter(|h| h.fresh(now)) {
            *held = Some(h.clone());
            return Got::Bearer(h.bearer.clone());
        }
        let mine = held.as_ref().filter(|h| h.bearer.at == at);
        let usable = stored.as_ref().or(mine).filter(|h| h.valid(now)).map(|h| h.bearer.clone());
        let taken = match st.fetching {
            true => None,
            false => {
                step(state, |c| async move { endpoint_auth::take_fetch(&**c, &k.0, &k.1, &k.2, at, FETCH_LEASE).await })
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, endpoint = %k.2, "the right to fetch a token could not be taken");
                        None
                    })
            }
        };
        let Some(taken) = taken else {
            return match (usable, st.error) {
                (Some(b), _) => Got::Bearer(b),
                (None, Some(reason)) => Got::Failed(reason),
                (None, None) => Got::Wait,
            };
        };
        // Another process may have stored a token between the look and the lease.
        if let Some(h) = taken.token.as_ref().and_then(|t| opened(state, k, at, t)).filter(|h| h.fresh(now)) {
            if let Err(e) =
                step(state, |c| async move { endpoint_auth::release_fetch(&**c, &k.0, &k.1, &k.2, at).await }).await
            {
                tracing::debug!(error = %e, endpoint = %k.2, "an unused fetch lease was left to run out");
            }
            *held = Some(h.clone());
            return Got::Bearer(h.bearer);
        }
        // The secrets as they are now, under the lease: a refresh token rotated by another process's fetch.
        let secrets = match &taken.secrets {
            Some(sealed) => match super::open(state, &k.0, &k.1, &k.2, "oauth", sealed)
                .and_then(|s| serde_json::from_slice::<OauthSecrets>(&s).map_err(|e| e.to_string()))
            {
                Ok(s) => s,
                Err(e) => return Got::Failed(format!("the endpoint's OAuth secrets cannot be opened: {e}")),
            },
            None => OauthSecrets::default(),
        };
        match oauth::fetch(sender, settings, &secrets, bound.min(LONGEST_FETCH)).await {
            Ok(f) => {
                let sealed = super::seal(state, &k.0, &k.1, &k.2, "token", f.token.as_bytes());
                let rotated = f.refresh_token.as_ref().map(|r| {
                    let next = OauthSecrets { refresh_token: Some(r.clone()), ..secrets.clone() };
                    super::seal(
                        state,
                        &k.0,
                        &k.1,
                        &k.2,
                        "oauth",
                        &serde_json::to_vec(&next).expect("secrets serialise"),
                    )
                });
                let expires = now + f.lifetime;
                let (token, rotation) = (&sealed, rotated.as_deref());
                let got = endpoint_auth::Fetched { token, fetched: now, expires, secrets: rotation };
                let got = &got;
                let kept =
                    step(state, |c| async move { endpoint_auth::store_token(&**c, &k.0, &k.1, &k.2, at, got).await })
                        .await;
                match (kept, rotated.is_some()) {
                    (Ok(true), _) => {}
                    // The client was changed or removed meanwhile: what it gave belongs to the old one.
                    (Ok(false), _) => tracing::info!(endpoint = %k.2, "the OAuth client changed during a token fetch"),
                    (Err(e), true) => tracing::error!(error = %e, endpoint = %k.2,
                        "a rotated refresh token could not be kept: the next refresh may be refused"),
                    (Err(e), false) => tracing::warn!(error = %e, endpoint = %k.2,
                        "a fetched token could not be kept for the other processes"),
                }
                let bearer = Bearer { token: f.token, sealed, endpoint: k.clone(), at, fetched: now };
                let h = Held { bearer, expires };
                *held = Some(h.clone());
                Got::Bearer(h.bearer)
            }
            Err(reason) => {
                tracing::info!(endpoint = %k.2, reason = %reason, "fetching an OAuth token failed");
                let why = reason.as_str();
                let noted = step(state, |c| async move {
                    endpoint_auth::store_failure(&**c, &k.0, &k.1, &k.2, at, why, FAILURE_PAUSE).await
                })
                .await;
                if let Err(e) = noted {
                    tracing::warn!(error = %e, endpoint = %k.2, "a failed token fetch could not be noted");
                }
                match usable {
                    Some(b) => Got::Bearer(b),
                    None => Got::Failed(reason),
                }
            }
        }
    }

    /// The endpoint refused `bearer` (401): it is dropped here and for the other
    /// processes (if it is still the one kept), so the next attempt fetches anew;
    /// unless this process dropped one for the endpoint within [`DROPS_APART`].
    pub async fn refused(&self, state: &AppState, bearer: &Bearer) {
        let k = &bearer.endpoint;
        {
            let now = Utc::now();
            let mut dropped = self.dropped.lock().expect("never poisoned");
            if dropped.get(k).is_some_and(|at| now - *at < DROPS_APART) {
                return;
            }
            if dropped.len() >= MOST_SLOTS {
                dropped.clear();
            }
            dropped.insert(k.clone(), now);
        }
        let slot = self.slot(k);
        // Bounded: a fetch in flight ends within its own bound, and will replace it anyway.
        if let Ok(mut held) = tokio::time::timeout(Duration::from_secs(1), slot.lock()).await {
            if held.as_ref().is_some_and(|h| h.bearer.sealed == bearer.sealed) {
                *held = None;
            }
        }
        let (at, sealed) = (bearer.at, &bearer.sealed);
        if let Err(e) =
            step(state, |c| async move { endpoint_auth::drop_token(&**c, &k.0, &k.1, &k.2, at, sealed).await }).await
        {
            tracing::warn!(error = %e, endpoint = %k.2, "a refused token could not be dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(fetched: DateTime<Utc>, lifetime_s: i64) -> Held {
        let endpoint = (TenantId::generate(), AppId::generate(), EndpointId::generate());
        let bearer = Bearer { token: "t".into(), sealed: vec![], endpoint, at: fetched, fetched };
        Held { bearer, expires: fetched + chrono::Duration::seconds(lifetime_s) }
    }

    #[test]
    fn a_token_is_due_for_refresh_a_quarter_of_its_life_before_it_expires_and_never_more_than_a_minute() {
        let t0 = Utc::now();
        let s = chrono::Duration::seconds;
        let short = held(t0, 8);
        assert!(short.fresh(t0 + s(5)) && !short.fresh(t0 + s(6)), "8 s: refreshed from 6 s on");
        assert!(short.valid(t0 + s(5)) && !short.valid(t0 + s(7)), "and not sent in its last 2 s");
        let long = held(t0, 3600);
        assert!(long.fresh(t0 + s(3539)) && !long.fresh(t0 + s(3541)), "an hour: a minute before");
    }
}
