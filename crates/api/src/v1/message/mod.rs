//! A message's routes, one file per part: create, list and get (`crud`, the
//! hottest route of all, registered first), precheck and expunges (`ops`), the
//! raw payload, an attempt's headers and search (`reads`), the streams, and the
//! token that may only create messages.

pub(crate) mod crud;
mod ops;
mod reads;
pub(crate) mod stream;
pub(crate) mod token;

use utoipa_actix_web::service_config::ServiceConfig;

/// Creating a message first: see [`super::configure`].
pub fn configure(cfg: &mut ServiceConfig) {
    crud::configure(cfg);
    ops::configure(cfg);
    reads::configure(cfg);
    stream::configure(cfg);
    token::configure(cfg);
}
