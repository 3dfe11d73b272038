//! The tenant's `/api/v1` routes: the Svix-compatible send API (applications,
//! endpoints and their extras, event types, messages, attempts, app-portal
//! tokens) and the receive side's sources and inbound events, and what the web
//! UI needs beyond them (search, portal branding, hourly stats, test events). Every handler takes
//! [`TenantAuth`](crate::TenantAuth) or [`KeyAuth`](crate::KeyAuth) and scopes
//! every query by it: another tenant's id answers 404 like a missing one.

pub(crate) mod alert_settings;
mod app_ops;
pub(crate) mod applications;
mod attempt_stats;
mod attempts;
mod broadcast;
pub(crate) mod broker_source;
mod console;
mod counts;
mod destination;
pub(crate) mod endpoint;
pub mod environment;
mod event_type;
pub mod expand;
mod filter_try;
mod inbound_events;
mod integrations;
mod json_schema;
pub(crate) mod message;
pub(crate) mod operational;
mod poller;
pub(crate) mod portal;
pub(crate) mod portal_settings;
mod sources;
mod statistics;
mod tasks;
pub(crate) mod transformation_try;
pub(crate) mod transformations;
pub(crate) mod usage;
pub(crate) mod validate;
mod whoami;

use utoipa_actix_web::service_config::ServiceConfig;

/// Registers the routes; the caller wraps them in tenant authentication.
///
/// Messages first: actix tries routes in the order they are registered, each
/// with a regular expression (in `regex-lite`, a few microseconds a try), and
/// the request that comes most, creating a message, was behind some thirty of
/// them (a tenth of the API process's CPU at 1,000 messages a second). No
/// route of the others matches a message's path, so the order changes nothing
/// else.
pub fn configure(cfg: &mut ServiceConfig) {
    message::configure(cfg);
    broadcast::configure(cfg);
    applications::configure(cfg);
    app_ops::configure(cfg);
    alert_settings::configure(cfg);
    broker_source::configure(cfg);
    attempt_stats::configure(cfg);
    endpoint::configure(cfg);
    destination::configure(cfg);
    poller::configure(cfg);
    event_type::configure(cfg);
    attempts::configure(cfg);
    portal::configure(cfg);
    sources::configure(cfg);
    inbound_events::configure(cfg);
    console::configure(cfg);
    operational::configure(cfg);
    usage::configure(cfg);
    integrations::configure(cfg);
    environment::configure(cfg);
    tasks::configure(cfg);
    transformations::configure(cfg);
    filter_try::configure(cfg);
    statistics::configure(cfg);
    counts::configure(cfg);
    whoami::configure(cfg);
}
