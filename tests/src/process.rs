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
