//! The Svix-compatible `/api/v1` routes. Every handler takes [`TenantAuth`] and
//! scopes every query by it: another tenant's id answers 404 like a missing one.
//!
//! [`TenantAuth`]: hookgate_shared::http::TenantAuth

mod applications;
mod attempts;
mod endpoint_extras;
pub(crate) mod endpoints;
mod event_types;
mod messages;
mod portal;
mod validate;

use actix_web::web;

/// Registers the routes; the caller wraps them in tenant authentication.
pub fn configure(cfg: &mut web::ServiceConfig) {
    applications::configure(cfg);
    endpoints::configure(cfg);
    endpoint_extras::configure(cfg);
    event_types::configure(cfg);
    messages::configure(cfg);
    attempts::configure(cfg);
    portal::configure(cfg);
}
pub(crate) use endpoints::secret_purpose;
