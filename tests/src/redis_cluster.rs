//! Redis servers beyond the plain one: a Redis Cluster of six nodes (three
//! masters, a replica each), a master and replica under a Redis Sentinel, and a
//! TLS-only Redis, all on loopback.

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

/// Keys on the server on `port` that would never expire (`TTL` -1): Hookgate
/// writes none, so one left by a failover would be a stuck key.
pub fn keys_without_expiry(port: u16) -> usize {
    const SCRIPT: &str = "local n = 0
        for _, k in ipairs(redis.call('KEYS', '*')) do
            if redis.call('TTL', k) == -1 then n = n + 1 end
        end
        return n";
    let out = cli(port, &["eval", SCRIPT, "0"]);
    out.trim().parse().unwrap_or_else(|_| panic!("redis-cli eval on {port}: {out}"))
}

/// A port for a cluster node whose bus port (10,000 higher) is free too. Below the
/// ephemeral range: a port from it plus 10,000 may be past 65,535 (the node then
/// refuses to start) or taken by another test's connection.
fn free_cluster_port() -> u16 {
    use std::net::TcpListener;
    loop {
        let port = 20_000 + (ulid::Ulid::new().random() % 10_000) as u16;
        let both =
            TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok();
        if both {
            return port;
        }
    }
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
        let ports: Vec<u16> = (0..6).map(|_| free_cluster_port()).collect();
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
        assert!(
            out.status.success(),
            "cluster create on {ports:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
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

/// A Redis master with one replica, watched by a Redis Sentinel that fails over
/// to the replica half a second after the master stops answering.
pub struct RedisSentinel {
    dir: std::path::PathBuf,
    pub master_port: u16,
    pub replica_port: u16,
    pub sentinel_port: u16,
    children: Vec<Option<Child>>,
}

/// The name the Sentinel knows the master by (`HOOKGATE_REDIS_SENTINEL_MASTER`).
pub const SENTINEL_MASTER: &str = "hgmaster";

impl RedisSentinel {
    /// A master, its replica and a Sentinel, linked. Tried again on fresh ports if
    /// they do not link within the wait: a port found free can be taken by another
    /// test's server before ours binds it.
    pub fn start() -> Self {
        for _ in 0..3 {
            if let Some(s) = Self::try_start() {
                return s;
            }
        }
        panic!("the replica or the Sentinel did not come up, three times");
    }

    fn try_start() -> Option<Self> {
        let dir = std::env::temp_dir().join(format!("hookgate-sentinel-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let (master_port, replica_port, sentinel_port) = (free_port(), free_port(), free_port());
        let server = |port: u16, extra: &[String]| {
            Command::new("redis-server")
                .current_dir(&dir)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--dbfilename", &format!("dump-{port}.rdb")])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed")
        };
        let master = server(master_port, &[]);
        wait_for_port(master_port);
        let replica = server(replica_port, &["--replicaof".into(), "127.0.0.1".into(), master_port.to_string()]);
        wait_for_port(replica_port);
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {sentinel_port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {SENTINEL_MASTER} 500\n\
                 sentinel failover-timeout {SENTINEL_MASTER} 5000\n",
                dir.display()
            ),
        )
        .unwrap();
        let sentinel = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs as a Sentinel");
        wait_for_port(sentinel_port);
        let s = RedisSentinel {
            dir,
            master_port,
            replica_port,
            sentinel_port,
            children: vec![Some(master), Some(replica), Some(sentinel)],
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cli(replica_port, &["info", "replication"]).contains("master_link_status:up")
            || s.sentinel_master_port() != Some(master_port)
        {
            if Instant::now() >= deadline {
                return None; // `s` is dropped: its servers are stopped
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(s)
    }

    /// `REDIS_URL` with `HOOKGATE_REDIS_SENTINEL_MASTER`: the Sentinel, not a server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.sentinel_port)
    }

    /// The master's port as the Sentinel reports it now.
    pub fn sentinel_master_port(&self) -> Option<u16> {
        let out = cli(self.sentinel_port, &["sentinel", "get-master-addr-by-name", SENTINEL_MASTER]);
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// SIGKILLs the master and waits until the Sentinel has promoted the replica
    /// and the replica answers as a master.
    pub fn kill_master_and_wait_for_failover(&mut self) {
        if let Some(mut c) = self.children[0].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.sentinel_master_port() != Some(self.replica_port)
            || !cli(self.replica_port, &["role"]).starts_with("master")
        {
            assert!(Instant::now() < deadline, "the Sentinel did not fail over to the replica");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asks the Sentinel for a failover while the master keeps running (it turns
    /// into a replica), and waits until the replica is the master.
    pub fn fail_over_gracefully(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cli(self.sentinel_port, &["sentinel", "failover", SENTINEL_MASTER]).starts_with("OK") {
            assert!(Instant::now() < deadline, "the Sentinel refused a failover");
            std::thread::sleep(Duration::from_millis(200));
        }
        while self.sentinel_master_port() != Some(self.replica_port)
            || !cli(self.replica_port, &["role"]).starts_with("master")
        {
            assert!(Instant::now() < deadline, "the Sentinel did not fail over to the replica");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A value on the server on `port`.
    pub fn get(&self, port: u16, key: &str) -> String {
        cli(port, &["get", key]).trim().to_owned()
    }

    /// Keys on the server on `port` matching `pattern`.
    pub fn count_keys(&self, port: u16, pattern: &str) -> usize {
        cli(port, &["--scan", "--pattern", pattern]).lines().count()
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port on loopback that accepts connections and never answers: a Sentinel
/// or server that went silent without closing anything.
pub struct Blackhole {
    pub port: u16,
}

impl Blackhole {
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                held.push(stream);
            }
        });
        Blackhole { port }
    }
}
