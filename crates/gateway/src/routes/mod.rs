//! The gateway's own routes; the Svix-compatible API and `/in` belong to egress and ingress.

pub mod admin;
pub mod health;
