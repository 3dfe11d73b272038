//! The bench's own setup on the shared harness: the `bench` profile of
//! `scripts/stack.sh` (durable Postgres, Redis) and release-built `hookgate`
//! processes, one per role, configured for load.

use std::{collections::HashMap, path::PathBuf, process::Stdio};

pub use hookgate_tests::{process::Served as Hookgate, stack::root, stack::Stack};

pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789";

/// The environment of every Hookgate process of the run.
pub fn env(stack: &Stack, master_key: &str) -> HashMap<String, String> {
    let mut env = HashMap::from([
        ("DATABASE_URL".into(), stack.database_url.clone()),
        ("REDIS_URL".into(), stack.redis_url.clone()),
        ("HOOKGATE_ADMIN_TOKEN".into(), ADMIN_TOKEN.into()),
        ("HOOKGATE_MASTER_KEY".into(), master_key.into()),
        ("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), "127.0.0.1/32".into()),
        ("HOOKGATE_DB_POOL_SIZE".into(), "32".into()),
        ("HOOKGATE_WORKER_CONCURRENCY".into(), "128".into()),
        ("RUST_LOG".into(), "warn".into()),
        // Three processes on one host: each its own metrics port.
        ("HOOKGATE_METRICS_LISTEN".into(), "127.0.0.1:0".into()),
    ]);
    // Settings under trial reach the processes from the bench's own environment.
    for name in ["HOOKGATE_WORKER_POLL_MS", "HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES"] {
        if let Ok(v) = std::env::var(name) {
            env.insert(name.into(), v);
        }
    }
    env
}

/// `HOOKGATE_BIN`, or the release build; the test suite's smoke run uses the debug one.
fn bin() -> PathBuf {
    std::env::var_os("HOOKGATE_BIN").map(PathBuf::from).unwrap_or_else(|| root().join("target/release/hookgate"))
}

pub fn migrate(env: &HashMap<String, String>) -> anyhow::Result<()> {
    let ok = std::process::Command::new(bin()).arg("migrate").envs(env).stdout(Stdio::null()).status()?.success();
    anyhow::ensure!(ok, "hookgate migrate failed");
    Ok(())
}

/// `hookgate serve --role <role>`, answering on its own port.
pub async fn start(role: &str, env: &HashMap<String, String>) -> Hookgate {
    Hookgate::start_bin(&bin(), env, role).await
}
