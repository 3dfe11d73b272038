//! The `hookgate` binary as a real process, for the tests that need one (migrate,
//! the CLI, kill -9) and for `make bench`, which runs one process per role.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    time::Duration,
};

/// `HOOKGATE_BIN`, else `target/<profile>/hookgate` next to the test executable's
/// `deps/` folder.
pub fn hookgate_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("HOOKGATE_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps/<test>");
    let bin = dir.join("hookgate");
    assert!(bin.exists(), "{} is missing: run `cargo build --bin hookgate` (make test does)", bin.display());
    bin
}

/// A `hookgate` command with a clean environment holding only `env`.
pub fn hookgate(env: &[(&str, &str)]) -> tokio::process::Command {
    command(&hookgate_bin(), env)
}

/// A command of the binary at `bin` (another release's, say) with a clean
/// environment holding only `env`.
pub fn hookgate_at(bin: &Path, env: &[(&str, &str)]) -> tokio::process::Command {
    command(bin, env)
}

fn command(bin: &Path, env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.kill_on_drop(true);
    cmd
}

/// A `hookgate serve` process on its own port, killed when dropped.
pub struct Served {
    pub child: tokio::process::Child,
    pub port: u16,
    pub role: String,
}

impl Served {
    /// Starts `hookgate serve --role <role>` with `env` and waits until it answers.
    pub async fn start(env: &HashMap<String, String>, role: &str) -> Self {
        Self::start_bin(&hookgate_bin(), env, role).await
    }

    /// The same with a given binary (the bench runs the release build).
    pub async fn start_bin(bin: &Path, env: &HashMap<String, String>, role: &str) -> Self {
        let port = crate::servers::free_port();
        let mut env = env.clone();
        env.insert("HOOKGATE_LISTEN".into(), format!("127.0.0.1:{port}"));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let child = command(bin, &pairs).args(["serve", "--role", role]).spawn().expect("hookgate starts");
        let url = format!("http://127.0.0.1:{port}/healthz");
        for _ in 0..200 {
            if reqwest::get(&url).await.is_ok_and(|r| r.status().is_success()) {
                return Served { child, port, role: role.to_owned() };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("hookgate serve --role {role} did not answer on port {port}");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// SIGKILL: no shutdown, no goodbye.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM, and waits for the graceful shutdown.
    pub async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        }
        let _ = self.child.wait().await;
    }

    /// Peak resident set size in MB (`VmHWM`), 0 once the process is gone.
    pub fn peak_rss_mb(&self) -> f64 {
        let Some(pid) = self.child.id() else { return 0.0 };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    }
}
