//! The tenant's `/api/v1` routes: the Svix-compatible send API (applications,
//! endpoints and their extras, event types, messages, attempts, app-portal
//! tokens) and the receive side's sources and inbound events, and what the web
//! UI needs beyond them (search, portal branding, hourly stats, test events). Every handler takes
//! [`TenantAuth`](crate::TenantAuth) or [`KeyAuth`](crate::KeyAuth) and scopes
//! every query by it: another tenant's id answers 404 like a missing one.

pub(crate) mod applications;
mod attempts;
mod console;
mod endpoint_activity;
pub(crate) mod endpoint_extras;
pub(crate) mod endpoints;
mod event_types;
mod inbound_events;
mod messages;
pub(crate) mod operational;
mod portal;
mod portal_settings;
mod sources;
pub(crate) mod usage;
pub(crate) mod validate;

use actix_web::web;

/// Registers the routes; the caller wraps them in tenant authentication.
pub fn configure(cfg: &mut web::ServiceConfig) {
    applications::configure(cfg);
    endpoints::configure(cfg);
    endpoint_extras::configure(cfg);
    endpoint_activity::configure(cfg);
    event_types::configure(cfg);
    messages::configure(cfg);
    attempts::configure(cfg);
    portal::configure(cfg);
    sources::configure(cfg);
    inbound_events::configure(cfg);
    console::configure(cfg);
    operational::configure(cfg);
    usage::configure(cfg);
}
