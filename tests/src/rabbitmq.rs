//! A private RabbitMQ node on loopback for one test, as `tests/python/brokers.py` starts
//! one: its own node name, ports, epmd, Erlang cookie, data and logs under a temporary
//! directory, no plugins; stopped (with its epmd) and removed when dropped.

use std::{
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::servers::free_port;

/// Debian's `/usr/sbin/rabbitmq-server` `su`s to the rabbitmq user when run as
/// root; the real script beside it runs as any user with the paths given.
const DEBIAN_SCRIPT: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

/// How long a node may take to answer its first AMQP handshake.
const START_WITHIN: Duration = Duration::from_secs(90);

pub struct RabbitMq {
    pub port: u16,
    dir: PathBuf,
    /// The node's environment, for `rabbitmqctl`.
    env: Vec<(String, String)>,
    epmd: Option<Child>,
    node: Option<Child>,
}

impl RabbitMq {
    /// Starts a node and waits until it answers an AMQP handshake (within 90 s).
    pub async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("hookgate-rabbitmq-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut node = RabbitMq { port: free_port(), dir, env: Vec::new(), epmd: None, node: None };
        let (dist, epmd_port) = (free_port(), free_port());
        node.write_config();
        let env = node.env(dist, epmd_port);
        node.env = env.clone();
        // Our own epmd in the foreground: one the node started itself would outlive it.
        node.epmd = Some(
            Command::new("epmd")
                .args(["-port", &epmd_port.to_string(), "-address", "127.0.0.1"])
                .envs(env.iter().cloned())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("epmd is installed (apt-get install rabbitmq-server)"),
        );
        let out = std::fs::File::create(node.dir.join("stdout.log")).unwrap();
        let script = if Path::new(DEBIAN_SCRIPT).exists() { DEBIAN_SCRIPT } else { "rabbitmq-server" };
        node.node = Some(
            Command::new(script)
                .env_clear()
                .envs(std::env::vars().filter(|(k, _)| !k.starts_with("RABBITMQ_") && !k.starts_with("ERL_")))
                .envs(env)
                .current_dir(&node.dir)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                // A group of its own, so that drop ends the script, beam.smp and erl_child_setup.
                .process_group(0)
                .spawn()
                .expect("rabbitmq-server is installed (scripts/stack.sh up test installs it)"),
        );
        let (began, uri) = (Instant::now(), node.uri());
        loop {
            let dialled = lapin::Connection::connect(&uri, lapin::ConnectionProperties::default());
            if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(5), dialled).await {
                let _ = c.close(200, "ready".into()).await;
                return node;
            }
            let exited = node.node.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || began.elapsed() > START_WITHIN {
                let log = std::fs::read_to_string(node.dir.join("stdout.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!("RabbitMQ did not start on 127.0.0.1:{} ({exited:?}):\n{}", node.port, tail.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// The guest user, who may log in from loopback only: all that is used.
    pub fn uri(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2F", self.port)
    }

    /// Runs `rabbitmqctl` against this node (`set_vm_memory_high_watermark 0` holds
    /// every publish, as a memory alarm does), and panics if it fails.
    pub async fn ctl(&self, args: &[&str]) {
        let script = "/usr/lib/rabbitmq/bin/rabbitmqctl";
        let out = tokio::process::Command::new(if Path::new(script).exists() { script } else { "rabbitmqctl" })
            .args(args)
            .env_clear()
            .envs(std::env::vars().filter(|(k, _)| !k.starts_with("RABBITMQ_") && !k.starts_with("ERL_")))
            .envs(self.env.iter().cloned())
            .current_dir(&self.dir)
            .output()
            .await
            .expect("rabbitmqctl is installed beside rabbitmq-server");
        assert!(out.status.success(), "rabbitmqctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn write_config(&self) {
        let d = &self.dir;
        std::fs::write(
            d.join("rabbitmq.conf"),
            format!(
                "listeners.tcp.default = 127.0.0.1:{}\nloopback_users.guest = true\ndisk_free_limit.absolute = 1MB\n",
                self.port
            ),
        )
        .unwrap();
        std::fs::write(d.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(d.join("rabbitmq-env.conf"), "").unwrap();
        // Erlang reads $HOME/.erlang.cookie and refuses one that others can read.
        let cookie = d.join(".erlang.cookie");
        std::fs::write(&cookie, ulid::Ulid::new().to_string()).unwrap();
        std::fs::set_permissions(&cookie, std::fs::Permissions::from_mode(0o400)).unwrap();
    }

    fn env(&self, dist: u16, epmd: u16) -> Vec<(String, String)> {
        let d = |p: &str| self.dir.join(p).to_string_lossy().into_owned();
        [
            ("HOME", self.dir.to_string_lossy().into_owned()),
            ("ERL_EPMD_PORT", epmd.to_string()),
            ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_NODENAME", format!("hg{}@localhost", &ulid::Ulid::new().to_string()[18..])),
            ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_NODE_PORT", self.port.to_string()),
            ("RABBITMQ_DIST_PORT", dist.to_string()),
            ("RABBITMQ_CONF_ENV_FILE", d("rabbitmq-env.conf")),
            ("RABBITMQ_CONFIG_FILE", d("rabbitmq.conf")),
            ("RABBITMQ_ADVANCED_CONFIG_FILE", d("advanced.config")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE", d("enabled_plugins")),
            ("RABBITMQ_MNESIA_BASE", d("mnesia")),
            ("RABBITMQ_LOG_BASE", d("log")),
            ("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "-kernel inet_dist_use_interface {127,0,0,1}".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

impl Drop for RabbitMq {
    fn drop(&mut self) {
        for child in [self.node.take(), self.epmd.take()].into_iter().flatten() {
            // The whole group: the script, beam.smp, erl_child_setup.
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
            let mut child = child;
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
