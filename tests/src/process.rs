//! The `hookgate` binary, for tests that need real processes (migrate, CLI, kill -9).

use std::path::PathBuf;

/// `target/<profile>/hookgate`, next to the test executable's `deps/` folder.
pub fn hookgate_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps/<test>");
    let bin = dir.join("hookgate");
    assert!(bin.exists(), "{} is missing: run `cargo build --bin hookgate` (make test does)", bin.display());
    bin
}

/// A `hookgate` command with a clean environment holding only `env`.
pub fn hookgate(env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(hookgate_bin());
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
}

impl Served {
    /// Starts `hookgate serve --role <role>` with `env` and waits until it answers.
    pub async fn start(env: &std::collections::HashMap<String, String>, role: &str) -> Self {
        let port = crate::servers::free_port();
        let mut env = env.clone();
        env.insert("HOOKGATE_LISTEN".into(), format!("127.0.0.1:{port}"));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let child = hookgate(&pairs).args(["serve", "--role", role]).spawn().expect("hookgate starts");
        let url = format!("http://127.0.0.1:{port}/healthz");
        for _ in 0..200 {
            if reqwest::get(&url).await.is_ok_and(|r| r.status().is_success()) {
                return Served { child, port };
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("hookgate serve did not answer on port {port}");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// SIGKILL: no shutdown, no goodbye.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
