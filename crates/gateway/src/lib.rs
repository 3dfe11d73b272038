//! `hookgate-gateway` is the binary and its wiring: configuration to state, the
//! actix-web server with its outermost middleware (request ids, logs, HTTP
//! metrics, trailing-slash trimming), health and metrics routes, and the roles a
//! process can take (`all`, `api`, `ingress`, `worker`). It composes the other
//! crates and owns no handler of the product's own.
//!
//! The `hookgate` binary (`main.rs`) is a thin CLI over this library, so tests
//! start the same server in-process on port 0.

pub mod health;
pub mod openapi;
pub mod paths;
mod role;
pub mod startup;
pub mod telemetry;

pub use hookgate_shared::AppState;
pub use startup::{Application, Role};
