//! The bench's own services: durable Postgres and Redis (scripts/stack.sh's `bench`
//! profile) and release-built `hookgate` processes, one per role.

use std::{
    collections::HashMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// Postgres and Redis URLs of the bench stack.
pub struct Stack {
    pub database_url: String,
    pub redis_url: String,
}

impl Stack {
    pub fn up() -> anyhow::Result<Self> {
        let script = root().join("scripts/stack.sh");
        anyhow::ensure!(Command::new(&script).args(["up", "bench"]).status()?.success(), "stack.sh up bench failed");
        let env = Command::new(&script).args(["env", "bench"]).output()?;
        let vars: HashMap<String, String> = String::from_utf8_lossy(&env.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
            .collect();
        Ok(Stack { database_url: vars["DATABASE_URL"].clone(), redis_url: vars["REDIS_URL"].clone() })
    }

    pub fn down(&self) {
        let _ = Command::new(root().join("scripts/stack.sh")).args(["down", "bench"]).status();
    }

    pub fn env(&self, master_key: &str) -> HashMap<String, String> {
        HashMap::from([
            ("DATABASE_URL".into(), self.database_url.clone()),
            ("REDIS_URL".into(), self.redis_url.clone()),
            ("HOOKGATE_ADMIN_TOKEN".into(), ADMIN_TOKEN.into()),
            ("HOOKGATE_MASTER_KEY".into(), master_key.into()),
            ("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), "127.0.0.1/32".into()),
            ("HOOKGATE_DB_POOL_SIZE".into(), "32".into()),
            ("HOOKGATE_WORKER_CONCURRENCY".into(), "128".into()),
            ("RUST_LOG".into(), "warn".into()),
        ])
    }
}

/// A `hookgate serve --role <role>` process.
pub struct Hookgate {
    pub role: &'static str,
    pub port: u16,
    child: Child,
}

/// `HOOKGATE_BIN`, or the release build; the test suite's smoke run uses the debug one.
fn bin() -> PathBuf {
    std::env::var_os("HOOKGATE_BIN").map(PathBuf::from).unwrap_or_else(|| root().join("target/release/hookgate"))
}

pub fn migrate(env: &HashMap<String, String>) -> anyhow::Result<()> {
    let ok = Command::new(bin()).arg("migrate").envs(env).stdout(Stdio::null()).status()?.success();
    anyhow::ensure!(ok, "hookgate migrate failed");
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Hookgate {
    pub async fn start(role: &'static str, env: &HashMap<String, String>) -> anyhow::Result<Self> {
        let port = free_port();
        let child = Command::new(bin())
            .args(["serve", "--role", role])
            .envs(env)
            .env("HOOKGATE_LISTEN", format!("127.0.0.1:{port}"))
            .spawn()?;
        let url = format!("http://127.0.0.1:{port}/healthz");
        for _ in 0..200 {
            if reqwest::get(&url).await.is_ok_and(|r| r.status().is_success()) {
                return Ok(Hookgate { role, port, child });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("hookgate --role {role} did not start")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Peak resident set size in MB (`VmHWM`).
    pub fn peak_rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    }

    pub fn stop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Hookgate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
