//! What an attempt to an endpoint with authentication of its own adds: the client
//! with its certificate and CA, and its OAuth bearer token.

use std::time::{Duration, Instant};

use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    AppState,
};

use super::send::{self, Outcome, Request, Sender, Sent};
use super::senders::Senders;
use crate::auth::{tokens::Bearer, tokens::Got, Auths, Unread};

/// How an attempt goes, or why it does not.
pub(crate) enum Authorized {
    Send {
        sender: Sender,
        bearer: Option<Bearer>,
    },
    /// Not an attempt: due again in a moment (a token being fetched elsewhere,
    /// settings that cannot be read now).
    Wait,
    /// The attempt fails, with this reason, and no request goes.
    Failed(Sent),
}

/// The client and token for one attempt to endpoint `k`, whose settings last
/// changed at `at`, within the tenant's networks `allow`; `bound`: what the attempt may take.
pub(crate) async fn authorize(
    state: &AppState,
    auths: &Auths,
    senders: &Senders,
    allow: &[ipnet::IpNet],
    k: &(TenantId, AppId, EndpointId),
    at: chrono::DateTime<chrono::Utc>,
    bound: Duration,
) -> Authorized {
    let base = senders.for_networks(allow);
    let started = Instant::now();
    let failed = |reason: String| {
        Authorized::Failed(Sent {
            outcome: Outcome::AuthFailed,
            status: 0,
            body: reason,
            duration: started.elapsed(),
            retry_after: None,
        })
    };
    let loaded = match auths.of(state, &k.0, &k.1, &k.2, at).await {
        Ok(l) => l,
        Err(Unread::Db(e)) => {
            tracing::warn!(endpoint = %k.2, error = %e, "the endpoint's authentication could not be read; delivery waits");
            return Authorized::Wait;
        }
        Err(Unread::Unusable(e)) => {
            tracing::error!(endpoint = %k.2, error = %e, "the endpoint's authentication cannot be used");
            return failed(format!("the endpoint's OAuth client, certificate or CA cannot be used: {e}"));
        }
    };
    let sender = match &loaded.tls {
        Some(tls) => match senders.for_endpoint(allow, k, loaded.at, tls) {
            Ok(s) => s,
            Err(e) => return failed(e),
        },
        None => base.clone(),
    };
    if loaded.oauth.is_none() {
        return Authorized::Send { sender, bearer: None };
    }
    // The token server is reached through the tenant's client as it is: the
    // system's roots and no client certificate (those are the endpoint's).
    match auths.tokens.bearer(state, &base, k, &loaded, bound).await {
        Got::Bearer(b) => Authorized::Send { sender, bearer: Some(b) },
        Got::Wait => Authorized::Wait,
        Got::Failed(reason) => failed(reason),
    }
}

/// Sets the bearer token on a request: it replaces any custom `Authorization`.
pub(crate) fn with_bearer(request: &mut Request, bearer: Option<&Bearer>) {
    if let Some(b) = bearer {
        send::header(&mut request.headers, "authorization", &format!("Bearer {}", b.token));
    }
}

/// What the endpoint's answer means for its token: a 401 refuses it (see
/// [`Tokens::refused`](crate::auth::tokens::Tokens::refused)).
pub(crate) async fn answered(state: &AppState, auths: &Auths, bearer: Option<&Bearer>, status: u16) {
    if let (Some(b), 401) = (bearer, status) {
        auths.tokens.refused(state, b).await;
    }
}
