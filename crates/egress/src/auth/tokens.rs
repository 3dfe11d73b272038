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
    store::endpoint_auth::{self, Key},
    AppState,
};

use super::{oauth, Loaded, OauthSecrets};
use crate::deliver::send::Sender;

/// A token to send, and what identifies it where it is kept.
#[derive(Debug, Clone)]
pub struct Bearer {
    pub token: String,
    sealed: Vec<u8>,
    at: DateTime<Utc>,
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
    fetched: DateTime<Utc>,
    expires: DateTime<Utc>,
}

impl Held {
    /// Not yet due for refresh: a quarter of its life, at most a minute, before it expires.
    fn fresh(&self, now: DateTime<Utc>) -> bool {
        let ahead = ((self.expires - self.fetched) / 4).min(chrono::Duration::seconds(60));
        now < self.expires - ahead
    }

    /// Still good for a request sent now (while another process refreshes it).
    fn valid(&self, now: DateTime<Utc>) -> bool {
        now + chrono::Duration::seconds(2) < self.expires
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Held>>>;

/// The process's tokens, one lock per endpoint: deliveries of one endpoint wait
/// for the one fetch in flight rather than each making its own.
#[derive(Default)]
pub struct Tokens {
    slots: Mutex<HashMap<(TenantId, EndpointId), Slot>>,
}

/// How long one process may take to fetch before another may try.
const FETCH_LEASE: Duration = Duration::from_secs(30);
/// After a failed fetch, no process asks again for this long; attempts meanwhile
/// fail with the reason.
const FAILURE_PAUSE: Duration = Duration::from_secs(5);
/// The longest a token request may take.
const LONGEST_FETCH: Duration = Duration::from_secs(10);
/// Endpoints whose lock is kept; past it the map starts again.
const MOST_SLOTS: usize = 10_000;

fn key<'a>(k: &'a (TenantId, AppId, EndpointId)) -> Key<'a> {
    (&k.0, &k.1, &k.2)
}

impl Tokens {
    fn slot(&self, tenant: &TenantId, ep: &EndpointId) -> Slot {
        let mut slots = self.slots.lock().expect("never poisoned");
        if slots.len() >= MOST_SLOTS {
            slots.clear();
        }
        slots.entry((tenant.clone(), ep.clone())).or_default().clone()
    }

    /// The endpoint's token for an attempt that may take `bound` (a fetch takes
    /// part of it); `sender` is the tenant's guarded client.
    pub async fn bearer(
        &self,
        state: &AppState,
        sender: &Sender,
        k: &(TenantId, AppId, EndpointId),
        loaded: &Loaded,
        bound: Duration,
    ) -> Got {
        let Some((settings, _)) = &loaded.oauth else { return Got::Failed("the endpoint has no OAuth client".into()) };
        let slot = self.slot(&k.0, &k.2);
        let Ok(mut held) = tokio::time::timeout(bound, slot.lock()).await else { return Got::Wait };
        let now = Utc::now();
        if let Some(h) = held.as_ref().filter(|h| h.bearer.at == loaded.at && h.fresh(now)) {
            return Got::Bearer(h.bearer.clone());
        }
        let read = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            endpoint_auth::token_state(&**conn, key(k), loaded.at).await
        })
        .await;
        let st = match read {
            Ok(Some(st)) => st,
            // Changed since they were read: the next claim reads them again.
            Ok(None) => return Got::Wait,
            Err(e) => {
                tracing::warn!(error = %e, endpoint = %k.2, "the endpoint's token could not be read; delivery waits");
                return Got::Wait;
            }
        };
        let stored = st.token.as_ref().and_then(|(sealed, fetched, expires)| {
            let clear = super::open(state, &k.0, &k.1, &k.2, "token", sealed).ok()?;
            let token = String::from_utf8(clear).ok()?;
            let bearer = Bearer { token, sealed: sealed.clone(), at: loaded.at };
            Some(Held { bearer, fetched: *fetched, expires: *expires })
        });
        if let Some(h) = stored.as_ref().filter(|h| h.fresh(now)) {
            *held = Some(h.clone());
            return Got::Bearer(h.bearer.clone());
        }
        let mine = held.as_ref().filter(|h| h.bearer.at == loaded.at);
        let usable = stored.as_ref().or(mine).filter(|h| h.valid(now)).map(|h| h.bearer.clone());
        let taken = !st.fetching
            && db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                endpoint_auth::take_fetch(&**conn, key(k), loaded.at, FETCH_LEASE).await
            })
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, endpoint = %k.2, "the right to fetch a token could not be taken; delivery waits");
                false
            });
        if !taken {
            return match (usable, st.error) {
                (Some(b), _) => Got::Bearer(b),
                (None, Some(reason)) => Got::Failed(reason),
                (None, None) => Got::Wait,
            };
        }
        // The secrets as they are now: a refresh token rotated by another process's fetch.
        let secrets = match &st.secrets {
            Some(sealed) => match super::open(state, &k.0, &k.1, &k.2, "oauth", sealed)
                .and_then(|s| serde_json::from_slice::<OauthSecrets>(&s).map_err(|e| e.to_string()))
            {
                Ok(s) => s,
                Err(e) => return Got::Failed(format!("the endpoint's OAuth secrets cannot be opened: {e}")),
            },
            None => OauthSecrets::default(),
        };
        let fetched = oauth::fetch(sender, settings, &secrets, bound.min(LONGEST_FETCH)).await;
        match fetched {
            Ok(f) => {
                let sealed = super::seal(state, &k.0, &k.1, &k.2, "token", f.token.as_bytes());
                let rotated = f.refresh_token.as_ref().map(|r| {
                    let next = OauthSecrets { refresh_token: Some(r.clone()), ..secrets.clone() };
                    let json = serde_json::to_vec(&next).expect("secrets serialise");
                    super::seal(state, &k.0, &k.1, &k.2, "oauth", &json)
                });
                let (fetched, expires) = (now, now + f.lifetime);
                let kept = db::bounded(state.db_budget(), async {
                    let conn = db::conn(&state.db).await?;
                    endpoint_auth::store_token(
                        &**conn,
                        key(k),
                        loaded.at,
                        &sealed,
                        fetched,
                        expires,
                        rotated.as_deref(),
                    )
                    .await
                })
                .await;
                if let Err(e) = kept {
                    // Used here all the same; another process fetches its own.
                    tracing::warn!(error = %e, endpoint = %k.2, "a fetched token could not be kept for the other processes");
                }
                let h = Held { bearer: Bearer { token: f.token, sealed, at: loaded.at }, fetched, expires };
                *held = Some(h.clone());
                Got::Bearer(h.bearer)
            }
            Err(reason) => {
                tracing::info!(endpoint = %k.2, reason = %reason, "fetching an OAuth token failed");
                let noted = db::bounded(state.db_budget(), async {
                    let conn = db::conn(&state.db).await?;
                    endpoint_auth::store_failure(&**conn, key(k), loaded.at, &reason, FAILURE_PAUSE).await
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
    /// processes (if it is still the one kept), so the next attempt fetches anew.
    pub async fn refused(&self, state: &AppState, k: &(TenantId, AppId, EndpointId), bearer: &Bearer) {
        let slot = self.slot(&k.0, &k.2);
        // Bounded: a fetch in flight ends within its own bound, and will replace it anyway.
        if let Ok(mut held) = tokio::time::timeout(Duration::from_secs(1), slot.lock()).await {
            if held.as_ref().is_some_and(|h| h.bearer.sealed == bearer.sealed) {
                *held = None;
            }
        }
        let dropped = db::bounded(state.db_budget(), async {
            let conn = db::conn(&state.db).await?;
            endpoint_auth::drop_token(&**conn, key(k), bearer.at, &bearer.sealed).await
        })
        .await;
        if let Err(e) = dropped {
            tracing::warn!(error = %e, endpoint = %k.2, "a refused token could not be dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(fetched: DateTime<Utc>, lifetime_s: i64) -> Held {
        let bearer = Bearer { token: "t".into(), sealed: vec![], at: fetched };
        Held { bearer, fetched, expires: fetched + chrono::Duration::seconds(lifetime_s) }
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
