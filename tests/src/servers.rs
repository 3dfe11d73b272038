//! Private Postgres and Redis servers on loopback, for tests that stop and start them.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

/// A free port on 127.0.0.1 (bound and released; the window for a clash is tiny).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn is_root() -> bool {
    // Root runs CI; Postgres refuses to run as root.
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// Where PostgreSQL's server binaries are: on PATH, or Debian's versioned
/// directory (`scripts/stack.sh pgbin` knows both, and installs them if need be).
fn pg_bin(bin: &str) -> String {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let script = crate::stack::root().join("scripts/stack.sh");
        let out = Command::new(script).args(["pgbin", "test"]).output().expect("scripts/stack.sh runs");
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        // An `initdb` on PATH may be a link to Debian's directory, which alone has
        // every tool (`pg_basebackup`): the tools are taken from where it points.
        match std::fs::canonicalize(std::path::Path::new(&dir).join("initdb")) {
            Ok(real) if !dir.is_empty() && real.with_file_name("pg_ctl").exists() => {
                real.parent().map_or(dir, |p| p.display().to_string())
            }
            _ => dir,
        }
    });
    if dir.is_empty() {
        bin.to_owned()
    } else {
        format!("{dir}/{bin}")
    }
}

/// Runs a Postgres binary, as the `postgres` user when we are root (it refuses root).
fn pg_command(bin: &str) -> Command {
    let bin = pg_bin(bin);
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &bin]);
        c
    } else {
        Command::new(bin)
    }
}

/// `pg_dump` of a database, as text: what a backup of it would hold.
pub fn pg_dump(url: &str) -> Vec<u8> {
    let bin = pg_bin("pg_dump");
    // The client may live apart from the server binaries (Debian's wrapper on PATH).
    let bin = if Path::new(&bin).exists() { bin } else { "pg_dump".to_owned() };
    let out = Command::new(bin).arg(url).output().expect("pg_dump runs");
    assert!(out.status.success(), "pg_dump failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn run(mut cmd: Command, what: &str) {
    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A fresh directory for a cluster of a test's own, owned by the user Postgres runs as.
fn cluster_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hookgate-pg-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    if is_root() {
        let mut chown = Command::new("chown");
        chown.args(["postgres:", dir.to_str().unwrap()]);
        run(chown, "chown");
    }
    dir
}

/// A Postgres cluster of one test's own, so the test may stop and start it.
pub struct PgServer {
    dir: PathBuf,
    pub port: u16,
}

impl PgServer {
    pub fn start() -> Self {
        Self::start_configured(|_| {})
    }

    /// A cluster that speaks TLS only (`hostssl` lines alone over TCP) with the
    /// test CA's server certificate. The role `certuser` must also present a
    /// client certificate signed by that CA.
    pub fn start_tls(certs: &crate::certs::TestCerts) -> Self {
        let server = Self::start_configured(|data| {
            for f in ["server.crt", "server.key", "ca.crt"] {
                std::fs::copy(certs.dir.join(f), data.join(f)).unwrap();
            }
            let mut conf = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.conf")).unwrap();
            use std::io::Write;
            writeln!(
                conf,
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nssl_ca_file = 'ca.crt'"
            )
            .unwrap();
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\n\
                 hostssl all certuser 127.0.0.1/32 trust clientcert=verify-ca\n\
                 hostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
            if is_root() {
                let mut chown = Command::new("chown");
                chown.args(["-R", "postgres:", data.to_str().unwrap()]);
                run(chown, "chown");
            }
            let mut chmod = Command::new("chmod");
            chmod.args(["600", data.join("server.key").to_str().unwrap()]);
            run(chmod, "chmod");
        });
        server.psql("CREATE ROLE certuser LOGIN SUPERUSER");
        server
    }

    fn psql(&self, sql: &str) {
        let mut c = Command::new("psql");
        let port = self.port.to_string();
        c.args(["-h", "127.0.0.1", "-p", &port, "-U", "hookgate", "-d", "postgres", "-qc", sql]);
        run(c, "psql");
    }

    /// Initialises a cluster, lets `configure` change its data directory, starts it
    /// and creates the `hookgate` database.
    fn start_configured(configure: impl FnOnce(&std::path::Path)) -> Self {
        let dir = cluster_dir();
        let data = dir.join("data");
        let mut init = pg_command("initdb");
        init.args(["-D", data.to_str().unwrap(), "-U", "hookgate", "--auth=trust", "--no-locale", "-E", "UTF8"]);
        run(init, "initdb");
        configure(&data);
        let server = PgServer { dir, port: free_port() };
        server.start_again();
        server.psql("CREATE DATABASE hookgate");
        server
    }

    pub fn url(&self) -> String {
        format!("postgres://hookgate@127.0.0.1:{}/hookgate", self.port)
    }

    /// A streaming standby of this cluster (`pg_basebackup -R`), started: it
    /// replays what this one writes and answers reads.
    pub fn standby(&self) -> Self {
        self.standby_on(free_port())
    }

    /// [`PgServer::standby`] listening on `port`: a failover test puts the new
    /// standby where the dead primary was, so one host list names both for good.
    pub fn standby_on(&self, listen: u16) -> Self {
        Self::standby_of(self.port, listen)
    }

    /// A streaming standby of the cluster on 127.0.0.1:`primary` (one this test
    /// did not start: the bench's), listening on `listen`.
    pub fn standby_of(primary: u16, listen: u16) -> Self {
        let dir = cluster_dir();
        let data = dir.join("data");
        let mut backup = pg_command("pg_basebackup");
        let port = primary.to_string();
        backup.args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "hookgate",
            "-D",
            data.to_str().unwrap(),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ]);
        run(backup, "pg_basebackup");
        // A hot standby needs at least the primary's connection slots (the bench's
        // runs with 400), which were given on its command line, not in the files copied.
        let out = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "hookgate", "-d", "postgres", "-tAc", "SHOW max_connections"])
            .output()
            .expect("psql runs");
        let slots = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !slots.is_empty() {
            use std::io::Write;
            let mut conf = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.auto.conf")).unwrap();
            writeln!(conf, "max_connections = {slots}").unwrap();
        }
        let standby = PgServer { dir, port: listen };
        standby.start_again();
        standby
    }

    /// Runs one statement on this cluster's `hookgate` database (as `psql -c`).
    pub fn sql(&self, sql: &str) {
        let mut c = Command::new("psql");
        let port = self.port.to_string();
        c.args(["-h", "127.0.0.1", "-p", &port, "-U", "hookgate", "-d", "hookgate", "-qc", sql]);
        run(c, "psql");
    }

    /// The first column of the first row `sql` answers on the `hookgate`
    /// database, as text (`psql -tA`).
    pub fn value(&self, sql: &str) -> String {
        let port = self.port.to_string();
        let out = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "hookgate", "-d", "hookgate", "-tAc", sql])
            .output()
            .expect("psql runs");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Makes every commit here wait for a standby to have flushed it
    /// (`synchronous_standby_names = '*'`), and waits until one streams
    /// synchronously. Set after the standby's base backup, so that a standby
    /// promoted later does not wait for a standby of its own.
    pub fn make_synchronous(&self) {
        self.sql("ALTER SYSTEM SET synchronous_standby_names = '*'");
        self.sql("SELECT pg_reload_conf()");
        for _ in 0..300 {
            if self.value("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "1" {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no standby became synchronous");
    }

    /// `pg_ctl promote`: this standby ends recovery and takes writes.
    pub fn promote(&self) {
        let mut c = pg_command("pg_ctl");
        c.args(["-D", self.data().to_str().unwrap(), "-w", "promote"]);
        run(c, "pg_ctl promote");
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Every process of the cluster: the postmaster and its children (backends,
    /// background workers), from `postmaster.pid`'s first line and `/proc`.
    fn pids(&self) -> Vec<String> {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap_or_default();
        let Some(master) = pid_file.lines().next().map(|l| l.trim().to_owned()) else { return Vec::new() };
        let mut pids = vec![master.clone()];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // `pid (comm) state ppid …`; comm may hold spaces, so split after its `)`.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if ppid == Some(master.as_str()) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        pids
    }

    fn signal(&self, sig: &str) {
        let mut c = Command::new("kill");
        c.arg(sig).args(self.pids());
        run(c, "kill");
    }

    /// SIGSTOP to every process: connections stay open and the kernel keeps
    /// acknowledging TCP, but nothing answers. A stalled or partitioned database.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    pub fn stop(&self) {
        let mut c = pg_command("pg_ctl");
        c.args(["-D", self.data().to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
        run(c, "pg_ctl stop");
    }

    pub fn start_again(&self) {
        let opts = format!("-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off", self.port, self.dir.display());
        let mut c = pg_command("pg_ctl");
        c.args([
            "-D",
            self.data().to_str().unwrap(),
            "-l",
            self.dir.join("log").to_str().unwrap(),
            "-o",
            &opts,
            "-w",
            "start",
        ]);
        run(c, "pg_ctl start");
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // A test that failed while Postgres was paused must not leave it stopped.
        let _ =
            Command::new("kill").arg("-CONT").args(self.pids()).stdout(Stdio::null()).stderr(Stdio::null()).status();
        let mut c = pg_command("pg_ctl");
        c.args(["-D", self.data().to_str().unwrap(), "-m", "immediate", "stop"]);
        let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis server of one test's own.
pub struct RedisServer {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl RedisServer {
    pub fn start() -> Self {
        let mut s = RedisServer { port: free_port(), child: None };
        s.start_again();
        s
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn start_again(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    /// SIGSTOP: the connection stays open, nothing answers (a stalled Redis).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("the server runs").id().to_string();
        let mut c = Command::new("kill");
        c.args([sig, &pid]);
        run(c, "kill");
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
