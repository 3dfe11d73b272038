//! `hookgate-api` owns the management surface: every `/api/v1` handler (the
//! Svix-compatible send API, sources and their inbound events) and every
//! `/admin/v1` handler, with their request and response types, validation, the
//! auth middleware and extractors, the `Idempotency-Key` middleware, and the web
//! UI (the customer portal and the console: [`ui`]), which calls those handlers.
//!
//! Handlers parse path ids and bodies at the edge ([`path`]), then call the
//! stores (all SQL lives in `hookgate-shared`), egress's publisher and ingress's
//! source secrets. Nothing on the delivery or receive hot paths imports this
//! crate: the arrows run gateway → api → {ingress, egress} → shared.

pub mod admin;
mod admin_broker_sources;
mod admin_keys;
mod admin_tenant;
mod admin_views;
mod audit;
mod auth;
#[cfg(test)]
mod counting;
mod deadline;
mod idempotency;
mod idempotency_settle;
mod ingest;
pub mod openapi;
mod patch;
pub mod path;
mod principal;
pub(crate) mod quota;
mod text;
mod ui;
pub mod v1;
mod when;

use actix_web::middleware::from_fn;
use hookgate_shared::{
    http::ApiError,
    ids::{is_uid, Prefixed},
    store::page::{Order, PageRequest},
};
use serde::Deserialize;
use utoipa_actix_web::{scope, service_config::ServiceConfig};

pub use patch::Maybe;
pub use principal::{
    message_access, poller_access, portal_access, FeatureFlags, KeyAuth, KeyHolder, Operator, PortalAccess, Principal,
    TenantAuth,
};

/// The operator's API, the tenant's API and the Ingest API: each scope keeps its
/// `POST`s under `Idempotency-Key`, which the API document says ([`openapi`]).
const ADMIN: &str = "/admin/v1";
const API: &str = "/api/v1";
const INGEST: &str = "/ingest/api/v1";
pub(crate) const KEYED_SCOPES: [&str; 3] = [ADMIN, API, INGEST];

/// Registers `/admin/v1` (the operator's token), `/api/v1` (a tenant's key or an
/// app-portal token) and `/ingest/api/v1` (a tenant's key), each behind its
/// authentication and `Idempotency-Key`.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(
        scope(ADMIN)
            // Innermost first: the deadline bounds the handler, so the Idempotency-Key
            // middleware sees its 503 and releases the key; the middleware's and the
            // authentication's own queries are bounded where they run.
            .wrap(from_fn(text::reject_nul))
            .wrap(from_fn(deadline::deadline))
            .wrap(from_fn(audit::record))
            .wrap(from_fn(idempotency::idempotency))
            .wrap(from_fn(auth::require_operator))
            .configure(admin::configure),
    );
    cfg.service(
        scope(API)
            .wrap(from_fn(text::reject_nul))
            .wrap(from_fn(deadline::deadline))
            .wrap(from_fn(audit::record))
            .wrap(from_fn(idempotency::idempotency))
            .wrap(from_fn(quota::limit_api))
            .wrap(from_fn(auth::require_tenant))
            .configure(v1::configure)
            .configure(audit::configure),
    );
    cfg.service(
        scope(INGEST)
            .wrap(from_fn(text::reject_nul))
            .wrap(from_fn(deadline::deadline))
            .wrap(from_fn(audit::record))
            .wrap(from_fn(idempotency::idempotency))
            .wrap(from_fn(quota::limit_api))
            .wrap(from_fn(auth::require_tenant))
            .configure(ingest::configure),
    );
    // The pages last: their routes are patterns, tried on every request before
    // the ones that follow them (the scopes above are plain prefixes).
    ui::configure(cfg);
}

/// `?limit=&iterator=&order=` as Svix takes them.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct PageQuery {
    pub limit: Option<i64>,
    /// The `iterator` or `prevIterator` of an earlier page.
    pub iterator: Option<String>,
    /// `ascending` or `descending`; each list has its own default.
    #[param(inline)]
    pub order: Option<Order>,
}

impl PageQuery {
    /// The page asked for, its iterator parsed as an id of `T` (Svix answers 422
    /// to an iterator that is no id of the kind listed).
    pub fn page<T: Prefixed>(&self) -> Result<PageRequest, ApiError> {
        self.checked(|id| T::parse(id).is_ok())
    }

    /// The page asked for where the iterator is a name (event types): a `uid`.
    pub fn page_by_name(&self) -> Result<PageRequest, ApiError> {
        self.checked(is_uid)
    }

    /// The page asked for where `ok` says which iterators the list has.
    pub fn checked(&self, ok: impl Fn(&str) -> bool) -> Result<PageRequest, ApiError> {
        let page = PageRequest::new(self.limit, self.iterator.clone()).ordered(self.order);
        match &page.cursor {
            Some(c) if !ok(c.id()) => Err(ApiError::Validation(format!(
                "`iterator`: `{}` is not an iterator of this list",
                c.id().chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect::<String>()
            ))),
            _ => Ok(page),
        }
    }
}

/// A JSON body that may be absent: empty means `T::default()`, anything else must
/// parse (unknown fields refused where `T` says so). `Option<Json<T>>` would
/// silently drop a malformed body; this answers 422 naming what was wrong.
pub fn optional_json<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ApiError::Validation(format!("invalid body: {e}")))
}
