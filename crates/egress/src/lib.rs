//! `hookgate-egress` owns delivery: publishing a message with its deliveries
//! (the outbox write, [`publish`]), the worker that claims, signs, sends, retries
//! and records attempts ([`deliver`]), synchronous forwarding for ingress's sync
//! mode, Standard Webhooks signing, endpoint secrets, throttling, and the SSRF
//! guard, destinations other than HTTP ([`destinations`]: RabbitMQ, Postgres),
//! pruning messages past retention ([`prune`]), running endpoint replays
//! (background tasks, [`replay`]), and small fetches from
//! operator-allowed URLs for ingress ([`fetch`]: PayPal's certificates), and
//! alerts for people ([`alerts`]: e-mail over SMTP, chat webhooks), and
//! consuming broker sources into messages ([`consume`]: RabbitMQ, SQS, Redis streams).
//!
//! It is the only crate that makes outbound HTTP requests, and it imports no
//! handler: the API crate calls into it, never the other way round.

pub mod alerts;
pub mod auth;
pub mod broadcast;
pub mod consume;
pub mod deliver;
pub mod destinations;
pub mod fetch;
pub mod fifo;
pub mod metrics;
pub mod prune;
pub mod publish;
pub mod replay;
pub mod sandbox;
pub mod secrets;
pub mod signing;
pub mod ssrf;
pub mod transform;

#[cfg(test)]
mod props;
