//! What every HTTP-facing crate shares: the one mapping of errors to
//! `{code, detail}` responses, the request-id header, and the public URLs
//! Hookgate shows (which ingress also verifies against).
//!
//! Errors are mapped to HTTP exactly once, here; crates convert their own error
//! enums into [`ApiError`].

mod error;

pub use error::{ApiError, Failure};

/// The base of the URLs Hookgate shows (a source's address, a portal link):
/// `HOOKGATE_PUBLIC_URL` when the operator set it, else the request's own scheme
/// and host. A proxy's `Forwarded`/`X-Forwarded-*` headers count only when the
/// peer is one of `HOOKGATE_TRUSTED_PROXIES`: from anyone else they would let a
/// caller choose the host of the links Hookgate hands out (and of the URL that
/// URL-signing providers are verified against).
pub fn public_base(req: &actix_web::HttpRequest, config: &crate::Config) -> String {
    if let Some(base) = &config.public_url {
        return base.clone();
    }
    let trusted = req.peer_addr().is_some_and(|p| config.trusted_proxies.iter().any(|n| n.contains(&p.ip())));
    if trusted {
        let info = req.connection_info();
        return format!("{}://{}", info.scheme(), info.host());
    }
    // The connection's own: its Host header (or the URI's authority), and TLS or not.
    let scheme = req.uri().scheme_str().unwrap_or(if req.app_config().secure() { "https" } else { "http" });
    let host = req
        .headers()
        .get(actix_web::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_else(|| req.app_config().host());
    format!("{scheme}://{host}")
}

/// The address a source is shown at, and that providers which sign the URL sign.
pub fn source_url(req: &actix_web::HttpRequest, config: &crate::Config, id: &crate::ids::SourceId) -> String {
    format!("{}/in/{id}", public_base(req, config))
}

/// The request's id, in the request's extensions (set by the gateway's outermost middleware).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The response header carrying the request's id (set by the gateway's outermost middleware).
pub const REQUEST_ID: actix_web::http::header::HeaderName =
    actix_web::http::header::HeaderName::from_static("x-request-id");
