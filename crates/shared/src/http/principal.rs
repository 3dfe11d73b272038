//! Who a request acts for, set by the auth middleware and read by extractors.

use std::future::{ready, Ready};

use actix_web::{dev::Payload, FromRequest, HttpMessage, HttpRequest};

use super::ApiError;
use crate::ids::{ApiKeyId, TenantId};

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The agency, with the admin token.
    Operator,
    /// A tenant, with one of its API keys.
    Tenant { tenant: TenantId, key: ApiKeyId },
}

impl Principal {
    /// The scope of the caller's Idempotency-Keys.
    pub fn scope(&self) -> &str {
        match self {
            Principal::Operator => "operator",
            Principal::Tenant { tenant, .. } => tenant.as_str(),
        }
    }
}

fn principal(req: &HttpRequest) -> Option<Principal> {
    req.extensions().get::<Principal>().cloned()
}

/// Extracts the operator; a handler taking it cannot run for anyone else.
pub struct Operator;

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Operator) => Ok(Operator),
            _ => Err(ApiError::Unauthorized("the admin token is required".into())),
        })
    }
}

/// Extracts the calling tenant; every `/api/v1` handler scopes its queries by it.
pub struct TenantAuth(pub TenantId);

impl FromRequest for TenantAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Tenant { tenant, .. }) => Ok(TenantAuth(tenant)),
            _ => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}
