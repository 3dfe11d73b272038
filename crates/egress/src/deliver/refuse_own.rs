//! A layer over the HTTP client's connector that refuses a connection to Hookgate's own database or Redis, judged on the address and port actually dialled.
//!
//! The guarded resolver sees names without ports, so it cannot tell Hookgate's
//! Redis from a tenant's service on the same host; the connector can: the
//! connection it made says where it went. Refused there, no byte of the request
//! is written (over HTTPS the TLS handshake's first message has gone, which
//! neither Postgres nor Redis takes as a command).

use std::{future::Future, pin::Pin, task::Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

use crate::ssrf::Guard;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Wraps reqwest's connector (`ClientBuilder::connector_layer`).
#[derive(Clone)]
pub(super) struct RefuseOwn(pub Guard);

impl<S> tower_layer::Layer<S> for RefuseOwn {
    type Service = RefuseOwnService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RefuseOwnService { inner, guard: self.0.clone() }
    }
}

#[derive(Clone)]
pub(super) struct RefuseOwnService<S> {
    inner: S,
    guard: Guard,
}

impl<S, R> tower_service::Service<R> for RefuseOwnService<S>
where
    S: tower_service::Service<R> + Clone + Send + 'static,
    S::Response: Connection + Send,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: R) -> Self::Future {
        // The service that was made ready is the one called (tower's rule); a clone stays behind.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let guard = self.guard.clone();
        Box::pin(async move {
            guard.refresh_own().await;
            let mut ready = ready;
            let conn = ready.call(req).await.map_err(Into::into)?;
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            if let Some(info) = extras.get::<HttpInfo>() {
                // Dropped here: the connection closes before a request is written on it.
                guard.check_own(info.remote_addr()).map_err(|b| Box::new(b) as BoxError)?;
            }
            Ok(conn)
        })
    }
}
