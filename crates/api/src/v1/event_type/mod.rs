//! An event type's routes: its rows (`crud`), its retry schedule, and the import
//! of event types from an OpenAPI document.

pub(crate) mod crud;
mod import;
mod schedule;

use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    crud::configure(cfg);
    schedule::configure(cfg);
    import::configure(cfg);
}
