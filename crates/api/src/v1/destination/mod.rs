//! A destination's routes (an endpoint row of another kind: RabbitMQ, Postgres,
//! SQS, …): its rows (`crud`), what it shows (`out`), and its attempts, headers,
//! secret and progress (`ops`).

mod crud;
mod ops;
mod out;

use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    crud::configure(cfg);
    ops::configure(cfg);
}
