//! `hookgate-ingress` owns the receive side: sources, the provider-facing
//! `POST /in/{source_id}`, signature verification, idempotency keys, exactly-once
//! admission (async and sync modes), inbound-event listing and replay, and the
//! retention pruner.
//!
//! The dedupe decision is one `INSERT … ON CONFLICT DO NOTHING`; Redis only ever
//! answers a duplicate for a key that Postgres has already committed.

pub mod admit;
pub mod api;
pub mod commit;
pub mod extract;
pub mod metrics;
pub mod prune;
pub mod receive;
pub mod verify;

use actix_web::web;

/// Registers `POST /in/{source_id}`; it takes no credential but the signature.
pub fn configure_receive(cfg: &mut web::ServiceConfig) {
    cfg.service(receive::receive);
}
