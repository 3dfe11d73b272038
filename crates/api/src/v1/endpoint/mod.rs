//! An endpoint's routes, one file per part (as Svix's `v1/endpoints/endpoint/`):
//! its rows (`crud`, and `rows`, the write path destinations and ingest endpoints
//! share), its secret, headers, authentication, stats, test sends and the
//! application's endpoint health.

pub(crate) mod auth;
pub(crate) mod crud;
mod example;
pub(crate) mod headers;
mod health;
mod msgs;
pub(crate) mod rows;
pub(crate) mod secret;
mod stats;

use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    crud::configure(cfg);
    secret::configure(cfg);
    headers::configure(cfg);
    stats::configure(cfg);
    health::configure(cfg);
    auth::configure(cfg);
    example::configure(cfg);
    msgs::configure(cfg);
}
