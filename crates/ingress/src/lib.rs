//! `hookgate-ingress` owns the provider-facing hot path: `POST /in/{source_id}`
//! ([`receive`]), signature verification ([`verify`]), the idempotency value and
//! event type ([`extract`]) and the derived key ([`key`]), exactly-once admission
//! in async mode (group commit, [`commit`]) and sync mode ([`admit`]), retention
//! ([`prune`]), the source-secret and ingest-token handling that needs ([`secrets`]),
//! and the ticks of cron sources, admitted as any event ([`cron`]).
//!
//! The dedupe decision is one `INSERT … ON CONFLICT DO NOTHING`; Redis only ever
//! answers a duplicate for a key that Postgres has already committed. Sync mode
//! forwards through egress; nothing here imports a management handler.

pub mod admit;
pub mod alerts;
pub mod commit;
pub mod cron;
pub mod door;
pub mod extract;
pub mod key;
pub mod metrics;
pub mod prune;
pub mod receive;
pub mod refusals;
pub mod secrets;
pub mod verify;

#[cfg(test)]
mod props;

/// Registers `POST /in/{source_id}` (no credential but the signature) and an
/// ingest source's `POST /in/{source_id}/{token}`.
pub fn configure_receive(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(receive::receive).service(receive::receive_ingest).service(door::subscribe);
}
