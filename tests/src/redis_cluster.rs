//! Redis servers beyond the plain one: a Redis Cluster of six nodes (three
//! masters, a replica each) and a TLS-only Redis, all on loopback.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{certs::TestCerts, servers::free_port};

fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server did not start on port {port}");
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli is installed with redis-server");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Six `redis-server --cluster-enabled yes` processes made into one cluster.
pub struct RedisCluster {
    dir: std::path::PathBuf,
    pub ports: Vec<u16>,
    children: Vec<Option<Child>>,
}

impl RedisCluster {
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("hookgate-cluster-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
        let mut cluster = RedisCluster { dir, ports: ports.clone(), children: Vec::new() };
        for &port in &ports {
            let node_dir = cluster.dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let child = Command::new("redis-server")
                .current_dir(&node_dir)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
                .args(["--cluster-config-file", "nodes.conf"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed");
            cluster.children.push(Some(child));
        }
        for &port in &ports {
            wait_for_port(port);
        }
        let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        assert!(out.status.success(), "cluster create: {}", String::from_utf8_lossy(&out.stdout));
        cluster.wait_until_ok();
        cluster
    }

    /// The seed nodes, as `REDIS_URL` takes them with `HOOKGATE_REDIS_CLUSTER=true`.
    pub fn url(&self) -> String {
        self.ports[..3].iter().map(|p| format!("redis://127.0.0.1:{p}/")).collect::<Vec<_>>().join(",")
    }

    /// Waits until every live node reports `cluster_state:ok`.
    pub fn wait_until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let live: Vec<u16> =
                self.ports.iter().zip(&self.children).filter(|(_, c)| c.is_some()).map(|(p, _)| *p).collect();
            if live.iter().all(|p| cli(*p, &["cluster", "info"]).contains("cluster_state:ok")) {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not become ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The ports of the nodes that are masters now.
    pub fn masters(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.children)
            .filter(|(p, c)| c.is_some() && cli(**p, &["role"]).starts_with("master"))
            .map(|(p, _)| *p)
            .collect()
    }

    /// Keys across the masters matching `pattern`.
    pub fn count_keys(&self, pattern: &str) -> usize {
        self.masters().iter().map(|p| cli(*p, &["--scan", "--pattern", pattern]).lines().count()).sum()
    }

    /// How many times the masters ran a command (`INFO commandstats`), e.g. `evalsha`.
    pub fn calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        self.masters()
            .iter()
            .flat_map(|p| {
                cli(*p, &["info", "commandstats"])
                    .lines()
                    .filter_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// SIGKILLs the node on `port`.
    pub fn kill(&mut self, port: u16) {
        let at = self.ports.iter().position(|p| *p == port).expect("a node of this cluster");
        if let Some(mut c) = self.children[at].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis that speaks TLS only, with the test CA's server certificate.
pub struct TlsRedis {
    pub port: u16,
    child: Child,
}

impl TlsRedis {
    pub fn start(certs: &TestCerts) -> Self {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--tls-cert-file", &certs.path("server.crt"), "--tls-key-file", &certs.path("server.key")])
            .args(["--tls-ca-cert-file", &certs.path("ca.crt"), "--tls-auth-clients", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed, built with TLS");
        wait_for_port(port);
        TlsRedis { port, child }
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
