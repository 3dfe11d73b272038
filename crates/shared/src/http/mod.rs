//! What every HTTP-facing crate shares: the one mapping of errors to
//! `{code, detail}` responses, the request-id header, and the public URLs
//! Hookgate shows (which ingress also verifies against).
//!
//! Errors are mapped to HTTP exactly once, here; crates convert their own error
//! enums into [`ApiError`].

mod error;

pub use error::ApiError;

/// The base of the URLs Hookgate shows (a source's address, a portal link):
/// `HOOKGATE_PUBLIC_URL` when the operator set it, else the request's own scheme
/// and host.
pub fn public_base(req: &actix_web::HttpRequest, config: &crate::Config) -> String {
    match &config.public_url {
        Some(base) => base.clone(),
        None => {
            let info = req.connection_info();
            format!("{}://{}", info.scheme(), info.host())
        }
    }
}

/// The address a source is shown at, and that providers which sign the URL sign.
pub fn source_url(req: &actix_web::HttpRequest, config: &crate::Config, id: &crate::ids::SourceId) -> String {
    format!("{}/in/{id}", public_base(req, config))
}

/// The response header carrying the request's id (set by the gateway's outermost middleware).
pub const REQUEST_ID: actix_web::http::header::HeaderName =
    actix_web::http::header::HeaderName::from_static("x-request-id");
