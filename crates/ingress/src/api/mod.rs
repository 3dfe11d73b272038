//! The tenant's ingress API under `/api/v1`: sources and their inbound events.

pub mod events;
pub mod sources;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    sources::configure(cfg);
    events::configure(cfg);
}
