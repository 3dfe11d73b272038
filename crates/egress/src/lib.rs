//! `hookgate-egress` owns the send side: the Svix-compatible `/api/v1` API
//! (applications, endpoints, event types, messages, attempts), the delivery
//! worker that signs and sends, retries and records attempts, and the SSRF guard.
//!
//! It is the only crate that makes outbound HTTP requests.

pub mod api;
pub mod deliver;
pub mod metrics;
pub mod publish;
pub mod signing;
pub mod ssrf;
