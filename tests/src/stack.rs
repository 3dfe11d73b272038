//! The shared Postgres and Redis of a profile (`test`, `bench`, `run`), started and
//! stopped by `scripts/stack.sh`: the one place that knows how they are run.

use std::{collections::HashMap, path::PathBuf, process::Command};

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

/// Postgres and Redis URLs of a running stack.
pub struct Stack {
    profile: String,
    pub database_url: String,
    pub redis_url: String,
}

impl Stack {
    /// Starts the profile's servers (idempotent) and reads their URLs.
    pub fn up(profile: &str) -> anyhow::Result<Self> {
        let script = root().join("scripts/stack.sh");
        anyhow::ensure!(
            Command::new(&script).args(["up", profile]).status()?.success(),
            "stack.sh up {profile} failed"
        );
        let env = Command::new(&script).args(["env", profile]).output()?;
        let vars: HashMap<String, String> = String::from_utf8_lossy(&env.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
            .collect();
        // PostgreSQL's tools (pgbench, initdb) may live off PATH, in Debian's versioned directory.
        let bin = Command::new(&script).args(["pgbin", profile]).output()?;
        let bin = String::from_utf8_lossy(&bin.stdout).trim().to_owned();
        if !bin.is_empty() {
            let path = std::env::var("PATH").unwrap_or_default();
            if !path.split(':').any(|p| p == bin) {
                std::env::set_var("PATH", format!("{bin}:{path}"));
            }
        }
        let get = |k: &str| vars.get(k).cloned().ok_or_else(|| anyhow::anyhow!("stack.sh env {profile}: no {k}"));
        Ok(Stack { profile: profile.to_owned(), database_url: get("DATABASE_URL")?, redis_url: get("REDIS_URL")? })
    }

    pub fn down(&self) {
        let _ = Command::new(root().join("scripts/stack.sh")).args(["down", &self.profile]).status();
    }
}
