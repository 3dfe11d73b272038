//! A layer over the HTTP client's connector that refuses a connection to Hookgate's own database or Redis, judged on the address and port actually dialled.
//!
//! The guarded resolver sees names without ports, so it cannot tell Hookgate's
//! Redis from a tenant's service on the same host; the connector can: the
//! connection it made says where it went. Refused there, no byte of the request
//! is written (over HTTPS the TLS handshake's first message has gone, which
//! neither Postgres nor Redis takes as a command). A connection that does not say
//! where it went (no `HttpInfo`) is refused too: it could be anywhere.

use std::{future::Future, pin::Pin, task::Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

use crate::ssrf::{Blocked, Guard};

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
            // Dropped on any error here: the connection closes before a request is written on it.
            let Some(info) = extras.get::<HttpInfo>() else {
                // Where it went is unknown, so it could be anywhere: refused (fail closed).
                return Err("the connection did not say which address it reached, so it is not used".into());
            };
            // An address literal of the tenant's was refused before any connection
            // (`Guard::check_url`): here the address is one a name resolved to, which
            // the refusal does not show.
            guard.check_own(info.remote_addr()).map_err(|b| Box::new(Blocked { literal: false, ..b }) as BoxError)?;
            Ok(conn)
        })
    }
}

#[cfg(test)]
mod tests {
    use hyper_util::client::legacy::connect::Connected;
    use tower_layer::Layer;
    use tower_service::Service;

    use super::*;

    /// A connection that says nothing of where it went (no `HttpInfo`).
    struct Unsaid;

    impl Connection for Unsaid {
        fn connected(&self) -> Connected {
            Connected::new()
        }
    }

    #[derive(Clone)]
    struct Connects;

    impl tower_service::Service<()> for Connects {
        type Response = Unsaid;
        type Error = BoxError;
        type Future = std::future::Ready<Result<Unsaid, BoxError>>;

        fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            std::future::ready(Ok(Unsaid))
        }
    }

    #[tokio::test]
    async fn a_connection_that_does_not_say_where_it_went_is_refused() {
        let mut service = RefuseOwn(Guard::default()).layer(Connects);
        std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
        let made = service.call(()).await;
        assert!(made.is_err(), "a connection whose address is unknown was used");
    }
}
