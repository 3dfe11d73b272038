//! The one mapping of errors to HTTP: status code plus `{code, detail}` body.

use actix_web::{http::StatusCode, HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::StoreError;

/// An error a request ends with. `code` strings follow Svix where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Validation(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(String),
    #[error("this Idempotency-Key was already used for a different request")]
    IdempotencyMismatch,
    #[error("a request with this Idempotency-Key is still being processed; retry later")]
    IdempotencyInFlight,
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(usize),
    #[error("the database is unavailable; retry later")]
    Unavailable,
    #[error("internal error")]
    Internal(String),
    /// Over a tenant's quota: 429 with `Retry-After`, the body naming the limit.
    #[error("{0}")]
    Quota(crate::quota::Exceeded),
    /// Over a rate of Hookgate's own (not a tenant's quota): 429 with `Retry-After`.
    #[error("{detail}")]
    RateLimited { detail: String, retry_after_secs: u64 },
    /// A status and code of a side's own (ingress's `invalid_signature`, say).
    #[error("{detail}")]
    Coded { status: StatusCode, code: &'static str, detail: String },
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Validation(_) => "validation",
            ApiError::Unauthorized(_) => "authentication_failed",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::IdempotencyMismatch => "idempotency_key_reused",
            ApiError::IdempotencyInFlight => "idempotency_in_flight",
            ApiError::TooLarge(_) => "payload_too_large",
            ApiError::Unavailable => "unavailable",
            ApiError::Internal(_) => "internal",
            ApiError::Quota(_) => "quota_exceeded",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Coded { code, .. } => code,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Validation(_) | ApiError::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) | ApiError::IdempotencyInFlight => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Quota(_) | ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Coded { status, .. } => *status,
        }
    }

    fn error_response(&self) -> HttpResponse {
        // The one place a request's error is logged: internal details stay in the
        // log, the client gets words it can act on.
        match self {
            ApiError::Internal(detail) => tracing::error!(%detail, "request failed"),
            ApiError::Unavailable => tracing::warn!("request failed: database unavailable"),
            _ => {}
        }
        // Svix answers 422 with a list of `{loc, msg, type}` (its SDKs parse it as
        // HTTPValidationError); the message names the field in words too.
        let detail = match self {
            ApiError::Validation(msg) => {
                Detail::Items(vec![ValidationItem { loc: vec!["body"], msg: msg.clone(), kind: "value_error" }])
            }
            other => Detail::Text(other.to_string()),
        };
        let mut res = HttpResponse::build(self.status_code());
        let mut body = Failure { code: self.code(), detail, limit: None, value: None };
        if let ApiError::Quota(e) = self {
            res.insert_header(("Retry-After", e.retry_after_secs().to_string()));
            body.limit = Some(e.limit.name());
            body.value = Some(e.value);
        }
        if let ApiError::RateLimited { retry_after_secs, .. } = self {
            res.insert_header(("Retry-After", (*retry_after_secs).max(1).to_string()));
        }
        res.json(body)
    }
}

/// Every error's body: `code` names the failure, `detail` says what was wrong.
#[derive(Serialize, ToSchema)]
pub struct Failure {
    /// A stable, machine-readable name of the failure (`validation`, `not_found`, …).
    code: &'static str,
    /// What was wrong.
    detail: Detail,
    /// A quota's name, when a quota refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    limit: Option<&'static str>,
    /// The quota's value, when a quota refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    value: Option<u64>,
}

/// A failure's `detail`: words, or for a body that does not parse, Svix's list.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Detail {
    Text(String),
    Items(Vec<ValidationItem>),
}

/// One thing wrong with a request's body, as Svix's `ValidationError`.
#[derive(Serialize, ToSchema)]
pub struct ValidationItem {
    /// Where: `["body"]`.
    loc: Vec<&'static str>,
    /// What, in words.
    msg: String,
    /// The kind of error (`value_error`).
    #[serde(rename = "type")]
    kind: &'static str,
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            _ if e.is_unavailable() => ApiError::Unavailable,
            // The constraint's name is the schema's, not the client's business: handlers
            // that expect a conflict say what it was in their own words.
            StoreError::Conflict(what) => {
                tracing::debug!(constraint = %what, "a unique key no handler names was violated");
                ApiError::Conflict("a resource with these values already exists".into())
            }
            StoreError::InvalidText => ApiError::Validation(e.to_string()),
            StoreError::KindNotAdmitted => {
                ApiError::Coded { status: StatusCode::CONFLICT, code: "kind_not_admitted", detail: e.to_string() }
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_no_handler_names_does_not_show_the_constraints_name() {
        let e = ApiError::from(StoreError::Conflict("endpoints_tenant_id_app_id_uid_key".into()));
        assert!(
            matches!(&e, ApiError::Conflict(d) if !d.contains("endpoints") && d.contains("already exists")),
            "{e:?}"
        );
    }
}
