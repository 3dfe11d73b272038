//! What every HTTP-facing crate shares: the `{code, detail}` error mapping, the
//! authenticated principal and its extractors, and pagination query parameters.
//!
//! Errors are mapped to HTTP exactly once, here; crates convert their own error
//! enums into [`ApiError`].

mod error;
mod patch;
mod principal;

pub use error::ApiError;
pub use patch::Maybe;
pub use principal::{portal_allows, KeyAuth, Operator, Principal, TenantAuth};

use serde::Deserialize;

use crate::store::page::PageRequest;

/// `?limit=&iterator=` as Svix takes them.
#[derive(Debug, Deserialize)]
pub struct PageQuery {
    pub limit: Option<i64>,
    pub iterator: Option<String>,
}

impl PageQuery {
    pub fn page(&self) -> PageRequest {
        PageRequest::new(self.limit, self.iterator.clone())
    }
}

/// A JSON body that may be absent: empty means `T::default()`, anything else must
/// parse (unknown fields refused where `T` says so). `Option<Json<T>>` would
/// silently drop a malformed body; this answers 422 naming what was wrong.
pub fn optional_json<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::Validation(format!("invalid body: {e}")))
}
