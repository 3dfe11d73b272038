//! The one harness: what every end-to-end test shares (a fresh database per test
//! cloned from a migrated template, the app on port 0, a recording HTTP sink,
//! private Postgres and Redis servers for fault tests) and what `make bench`
//! shares with them (the `scripts/stack.sh` servers, `hookgate` processes).
//!
//! Tests find the shared Postgres and Redis through `HOOKGATE_TEST_DATABASE_URL`
//! and `HOOKGATE_TEST_REDIS_URL`, which `make test` sets.

pub mod app;
pub mod certs;
pub mod db;
pub mod process;
pub mod rabbitmq;
pub mod redis_cluster;
pub mod servers;
pub mod sink;
pub mod stack;

pub use app::TestApp;
pub use db::TestDb;
pub use sink::Sink;

/// An error body's words: `detail` as a string, or the `msg`s of a validation list.
pub fn error_text(body: &serde_json::Value) -> String {
    match &body["detail"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => {
            items.iter().filter_map(|i| i["msg"].as_str()).collect::<Vec<_>>().join("; ")
        }
        other => other.to_string(),
    }
}
pub mod providers;
