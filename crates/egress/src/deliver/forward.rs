//! Sending one event to every matching endpoint now, for ingress's sync mode: the
//! provider waits for the answer, and its own retry is the retry.

use futures_util::future::join_all;
use hookgate_shared::{
    db,
    ids::{AppId, TenantId},
    store::{deliveries::ClaimedEndpoint, fanout, tenants, StoreError},
    AppState,
};

use super::{
    attempt::{signed_request, Envelope},
    authorized::{answered, authorize, with_bearer, Authorized},
    send::{self, Outcome},
    senders::Senders,
};
use crate::{metrics::EgressMetrics, secrets};

/// One event to forward.
pub struct Event<'a> {
    pub tenant: &'a TenantId,
    pub app: &'a AppId,
    /// Stable for the event: the same on the provider's every retry.
    pub webhook_id: &'a str,
    pub event_type: &'a str,
    pub content_type: &'a str,
    pub idempotency_key: &'a str,
    pub payload: &'a [u8],
}

#[derive(Clone)]
pub struct Forwarder {
    state: AppState,
    metrics: EgressMetrics,
    senders: std::sync::Arc<Senders>,
    /// Endpoints' OAuth clients, certificates and CAs, and their tokens.
    auths: std::sync::Arc<crate::auth::Auths>,
}

impl Forwarder {
    pub fn new(state: AppState, metrics: EgressMetrics) -> Self {
        let senders = std::sync::Arc::new(Senders::new(&state.config, state.own_services.clone()));
        Forwarder { state, metrics, senders, auths: Default::default() }
    }

    /// Whether every matching endpoint answered 2xx (true when none matches).
    pub async fn forward(&self, e: &Event<'_>) -> Result<bool, StoreError> {
        let (targets, svix_aliases) = db::bounded(self.state.db_budget(), async {
            let conn = db::conn(&self.state.db).await?;
            let aliases = tenants::get(&**conn, e.tenant).await?.is_none_or(|t| t.svix_headers);
            Ok((fanout::matching(&**conn, e.tenant, e.app, e.event_type, e.payload).await?, aliases))
        })
        .await?;
        // The operator's networks and the tenant's own (the operator's alone if unreadable now).
        // Unknown now: the provider is told to retry (503), as for any database error.
        let allow = hookgate_shared::networks::allowed(&self.state, e.tenant).await?;
        let sender = self.senders.for_networks(&allow);
        let (sender, allow) = (&sender, &allow);
        let sends = targets.into_iter().map(|ep| async move {
            let claimed = ClaimedEndpoint {
                url: ep.url.clone(),
                disabled: ep.disabled,
                throttle_rate: ep.throttle_rate,
                headers: ep.headers.clone(),
                secret: ep.secret.clone(),
                old_secret: ep.old_secret.clone(),
                old_secret_until: ep.old_secret_until,
                // Sync forwarding sends the provider's request as it came.
                transformation_at: None,
                // `matching` gives HTTP endpoints only.
                kind: ep.kind,
                destination: None,
                auth_at: ep.auth_at,
            };
            let keys = match secrets::signing_keys(&self.state, e.tenant, e.app, &ep.id, &claimed) {
                Ok(k) => k,
                Err(err) => {
                    tracing::error!(endpoint = %ep.id, error = %err, "endpoint secret cannot be opened");
                    return false;
                }
            };
            let envelope = Envelope {
                msg_id: e.webhook_id,
                content_type: e.content_type,
                idempotency_key: Some(e.idempotency_key),
                svix_aliases,
            };
            let headers = match secrets::open_headers(&self.state, e.tenant, e.app, &ep.id, &ep.headers) {
                Ok(h) => h,
                Err(err) => {
                    tracing::error!(endpoint = %ep.id, error = %err, "endpoint headers cannot be opened");
                    return false;
                }
            };
            let mut req = signed_request(&ep.url, &headers, &keys, &envelope, e.payload.to_vec());
            // An endpoint's own certificate, CA and OAuth token: without them now
            // (a token being fetched elsewhere, or refused), the provider is told to retry.
            let started = std::time::Instant::now();
            let (sender, bearer) = match ep.auth_at {
                None => (sender.clone(), None),
                Some(at) => {
                    let k = (e.tenant.clone(), e.app.clone(), ep.id.clone());
                    let bound = sender.timeout();
                    match authorize(&self.state, &self.auths, &self.senders, allow, &k, at, bound).await {
                        Authorized::Send { sender, bearer } => (sender, bearer),
                        Authorized::Wait | Authorized::Failed(_) => {
                            self.metrics.attempt(e.tenant.as_str(), send::Outcome::AuthFailed.label());
                            return false;
                        }
                    }
                }
            };
            with_bearer(&mut req, bearer.as_ref());
            let span = super::attempt::attempt_span(e.webhook_id, ep.id.as_str(), 1);
            // One timeout for the token and the request together: the provider is waiting.
            let Some(left) = sender.timeout().checked_sub(started.elapsed()).filter(|l| !l.is_zero()) else {
                return false;
            };
            let sent = sender.send_traced(req, span, left).await;
            answered(&self.state, &self.auths, bearer.as_ref(), sent.status).await;
            self.metrics.duration.observe(sent.duration.as_secs_f64());
            self.metrics.attempt(e.tenant.as_str(), sent.outcome.label());
            sent.outcome == Outcome::Success
        });
        Ok(join_all(sends).await.into_iter().all(|ok| ok))
    }
}
