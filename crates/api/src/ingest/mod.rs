//! `/ingest/api/v1`: Svix Ingest's API as the official SDKs call it, served from
//! the same store as `/api/v1/source` (an ingest source is a source with a type,
//! a token and an application of its own; see docs/ingest.md).

mod endpoints;
mod extras;
mod log;
mod sources;

pub fn configure(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    sources::configure(cfg);
    endpoints::configure(cfg);
    extras::configure(cfg);
    log::configure(cfg);
}
