//! `hookgate-gateway` wires the gateway together: configuration to state, the
//! actix-web server with its middleware (request ids, metrics, auth,
//! idempotency), the operator's admin API, health and metrics routes, and the
//! roles a process can take (`all`, `api`, `ingress`, `worker`).
//!
//! The `hookgate` binary (`main.rs`) is a thin CLI over this library, so tests
//! start the same server in-process on port 0.

pub mod auth;
pub mod idempotency;
pub mod routes;
pub mod startup;
pub mod telemetry;

pub use hookgate_shared::AppState;
pub use startup::{Application, Role};
