//! What every HTTP-facing crate shares: the one mapping of errors to
//! `{code, detail}` responses, and the request-id header.
//!
//! Errors are mapped to HTTP exactly once, here; crates convert their own error
//! enums into [`ApiError`].

mod error;

pub use error::ApiError;

/// The response header carrying the request's id (set by the gateway's outermost middleware).
pub const REQUEST_ID: actix_web::http::header::HeaderName =
    actix_web::http::header::HeaderName::from_static("x-request-id");
