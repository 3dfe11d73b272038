//! A polling endpoint's routes: read in order by the customer (`v1`), by named
//! consumers that commit their place (`v2`), and the token that may only poll.

mod token;
mod v1;
mod v2;

use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    v1::configure(cfg);
    v2::configure(cfg);
    token::configure(cfg);
}
