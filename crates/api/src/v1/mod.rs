//! The tenant's `/api/v1` routes: the Svix-compatible send API (applications,
//! endpoints and their extras, event types, messages, attempts, app-portal
//! tokens) and the receive side's sources and inbound events, and what the web
//! UI needs beyond them (search, portal branding, hourly stats, test events). Every handler takes
//! [`TenantAuth`](crate::TenantAuth) or [`KeyAuth`](crate::KeyAuth) and scopes
//! every query by it: another tenant's id answers 404 like a missing one.

mod app_ops;
pub(crate) mod applications;
mod attempt_stats;
mod attempts;
mod broadcast;
mod console;
mod counts;
mod destination_ops;
mod destination_out;
mod destinations;
mod endpoint_activity;
mod endpoint_auth;
pub(crate) mod endpoint_extras;
mod endpoint_health;
mod endpoint_msgs;
mod endpoint_rows;
pub(crate) mod endpoints;
pub mod environment;
pub mod environment_import;
mod event_type_import;
mod event_type_schedule;
mod event_types;
pub mod expand;
mod inbound_events;
mod integrations;
mod json_schema;
mod message_extras;
mod message_more;
mod message_stream;
mod message_token;
mod messages;
pub(crate) mod operational;
mod poller;
mod poller_token;
mod poller_v2;
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
    messages::configure(cfg);
    message_extras::configure(cfg);
    message_more::configure(cfg);
    message_stream::configure(cfg);
    broadcast::configure(cfg);
    applications::configure(cfg);
    app_ops::configure(cfg);
    attempt_stats::configure(cfg);
    endpoints::configure(cfg);
    endpoint_extras::configure(cfg);
    endpoint_health::configure(cfg);
    endpoint_auth::configure(cfg);
    destinations::configure(cfg);
    destination_ops::configure(cfg);
    poller::configure(cfg);
    poller_v2::configure(cfg);
    endpoint_activity::configure(cfg);
    endpoint_msgs::configure(cfg);
    event_types::configure(cfg);
    event_type_schedule::configure(cfg);
    event_type_import::configure(cfg);
    attempts::configure(cfg);
    portal::configure(cfg);
    sources::configure(cfg);
    inbound_events::configure(cfg);
    console::configure(cfg);
    operational::configure(cfg);
    usage::configure(cfg);
    integrations::configure(cfg);
    environment::configure(cfg);
    environment_import::configure(cfg);
    tasks::configure(cfg);
    transformations::configure(cfg);
    statistics::configure(cfg);
    counts::configure(cfg);
    whoami::configure(cfg);
    message_token::configure(cfg);
    poller_token::configure(cfg);
}
