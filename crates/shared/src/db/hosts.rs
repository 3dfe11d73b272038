//! Connecting to one of several Postgres hosts (libpq's host list,
//! `postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`), each
//! tried within a bound of its own, the one that last took a connection first.
//!
//! tokio-postgres tries the hosts in order, but bounds only the TCP connect of
//! each: a host that accepts and never answers (a stopped server, a frozen
//! machine whose kernel still answers) holds the whole connect until the pool
//! gives up, and one that drops packets takes the whole bound, so a dead first
//! host kept Hookgate from ever reaching the promoted second. Here each host but
//! the last has the bound alone; the last is bounded by the caller (the pool
//! allows every host its turn: [`Hosts::len`] times the bound). A host that
//! fails is passed for the next at once, for later connects too, so a caller
//! that allows only one turn (`/readyz`) reaches the next host on its next try.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::Duration,
};

use tokio_postgres::{
    config::Host,
    tls::{MakeTlsConnect, TlsConnect},
    Client, Config, Connection, Socket,
};

/// The hosts of one URL, as one-host configurations, and which answered last.
pub struct Hosts {
    configs: Vec<Config>,
    /// Shared by every pool and connection of the same URL in this process: once
    /// one finds the new primary, the others go to it first.
    last_good: Arc<AtomicUsize>,
    per_host: Duration,
    /// `load_balance_hosts=random`: each connect starts at a host drawn at random.
    random: bool,
}

impl Hosts {
    /// `config`'s hosts, each tried within `per_host`; `url` names the
    /// configuration for the memory of which host answered last.
    pub fn new(url: &str, config: &Config, per_host: Duration) -> Self {
        let random = config.get_load_balance_hosts() == tokio_postgres::config::LoadBalanceHosts::Random;
        Hosts { configs: each(config), last_good: remembered(url), per_host, random }
    }

    /// How many hosts there are: the caller bounds a connect by this many times the bound.
    pub fn len(&self) -> usize {
        self.configs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// A connection to the first host that takes one, starting with the one that
    /// did last. The last host tried is not bounded here (the caller's bound is).
    ///
    /// A host that fails or does not answer is passed for the next at once, here
    /// and for every later connect: a caller whose bound allows only one host's
    /// turn (`/readyz`) reaches the next host on its next try, not never.
    pub async fn connect<T>(&self, tls: &T) -> Result<(Client, Connection<Socket, T::Stream>), tokio_postgres::Error>
    where
        T: MakeTlsConnect<Socket> + Clone,
        T::TlsConnect: Send,
        T::Stream: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let n = self.configs.len();
        let first = match self.random {
            true => rand::random::<u32>() as usize % n,
            false => self.last_good.load(Ordering::Relaxed) % n,
        };
        let mut error = None;
        for step in 0..n {
            let at = (first + step) % n;
            let attempt = self.configs[at].connect(tls.clone());
            // Passed if this attempt ends without a connection, also when the
            // caller's bound drops it unfinished (the last host's is the caller's).
            let mut guard = PassUnlessDone { hosts: self, at, done: false };
            let outcome = if step + 1 < n {
                match tokio::time::timeout(self.per_host, attempt).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        tracing::debug!(host = at, "a Postgres host did not answer in time; trying the next");
                        continue;
                    }
                }
            } else {
                attempt.await
            };
            match outcome {
                Ok(connected) => {
                    guard.done = true;
                    self.last_good.store(at, Ordering::Relaxed);
                    return Ok(connected);
                }
                Err(e) => {
                    tracing::debug!(host = at, error = %e, "a Postgres host refused");
                    error = Some(e);
                }
            }
        }
        Err(error.expect("the last host's attempt is awaited to its end"))
    }

    /// The next connect starts after `at`, unless another has moved on already.
    fn pass(&self, at: usize) {
        if self.configs.len() > 1 {
            let next = (at + 1) % self.configs.len();
            let _ = self.last_good.compare_exchange(at, next, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// Passes `at` for the next host when dropped before a connection was made.
struct PassUnlessDone<'a> {
    hosts: &'a Hosts,
    at: usize,
    done: bool,
}

impl Drop for PassUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.hosts.pass(self.at);
        }
    }
}

/// `config`'s hosts as one-host configurations, in order.
///
/// Lists that do not match (as many addresses as hosts, one port or one per
/// host) are left whole, for tokio-postgres to refuse when it connects, as it
/// always has.
pub fn each(config: &Config) -> Vec<Config> {
    let (hosts, addrs, ports) = (config.get_hosts().len(), config.get_hostaddrs().len(), config.get_ports().len());
    let n = hosts.max(addrs).max(1);
    let matched = (hosts == 0 || addrs == 0 || hosts == addrs) && (ports <= 1 || ports == n);
    if n == 1 || !matched {
        return vec![config.clone()];
    }
    (0..n).map(|i| one_host(config, i)).collect()
}

/// A one-host configuration's host and port, to name it in logs and metrics.
pub fn describe(config: &Config) -> String {
    let host = match (config.get_hostaddrs().first(), config.get_hosts().first()) {
        (Some(a), _) => a.to_string(),
        (None, Some(Host::Tcp(h))) => h.clone(),
        #[cfg(unix)]
        (None, Some(Host::Unix(p))) => p.display().to_string(),
        (None, None) => "localhost".into(),
    };
    format!("{host}:{}", config.get_ports().first().copied().unwrap_or(5432))
}

/// The last host that answered for `url`, shared in this process.
fn remembered(url: &str) -> Arc<AtomicUsize> {
    static KNOWN: OnceLock<Mutex<HashMap<String, Arc<AtomicUsize>>>> = OnceLock::new();
    let mut known = KNOWN.get_or_init(Default::default).lock().expect("never poisoned");
    known.entry(url.to_owned()).or_default().clone()
}

/// `c` with only its `i`th host (and that host's address and port): every other
/// setting as it is.
fn one_host(c: &Config, i: usize) -> Config {
    let mut one = Config::new();
    if let Some(v) = c.get_user() {
        one.user(v);
    }
    if let Some(v) = c.get_password() {
        one.password(v);
    }
    if let Some(v) = c.get_dbname() {
        one.dbname(v);
    }
    if let Some(v) = c.get_options() {
        one.options(v);
    }
    if let Some(v) = c.get_application_name() {
        one.application_name(v);
    }
    one.ssl_mode(c.get_ssl_mode()).ssl_negotiation(c.get_ssl_negotiation());
    match c.get_hosts().get(i) {
        Some(Host::Tcp(h)) => {
            one.host(h);
        }
        #[cfg(unix)]
        Some(Host::Unix(p)) => {
            one.host_path(p);
        }
        None => {}
    }
    if let Some(a) = c.get_hostaddrs().get(i) {
        one.hostaddr(*a);
    }
    // One port for all hosts, or one each (libpq's rule; `each` checked which).
    if let Some(p) = c.get_ports().get(i).or_else(|| c.get_ports().first()) {
        one.port(*p);
    }
    if let Some(v) = c.get_connect_timeout() {
        one.connect_timeout(*v);
    }
    if let Some(v) = c.get_tcp_user_timeout() {
        one.tcp_user_timeout(*v);
    }
    one.keepalives(c.get_keepalives()).keepalives_idle(c.get_keepalives_idle());
    if let Some(v) = c.get_keepalives_interval() {
        one.keepalives_interval(v);
    }
    if let Some(v) = c.get_keepalives_retries() {
        one.keepalives_retries(v);
    }
    one.target_session_attrs(c.get_target_session_attrs())
        .channel_binding(c.get_channel_binding())
        .load_balance_hosts(c.get_load_balance_hosts());
    one
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: &str = "user=u password=p dbname=d options='-c x=1' application_name=a sslmode=require \
        connect_timeout=3 tcp_user_timeout=4 keepalives=1 keepalives_idle=5 keepalives_interval=6 \
        keepalives_retries=7 target_session_attrs=read-write channel_binding=disable";

    #[test]
    fn each_host_keeps_every_other_setting_of_the_list() {
        let many: Config = format!("host=h1,h2 hostaddr=10.0.0.1,10.0.0.2 port=5001,5002 {SETTINGS}").parse().unwrap();
        for (i, (h, a, p)) in [("h1", "10.0.0.1", "5001"), ("h2", "10.0.0.2", "5002")].into_iter().enumerate() {
            let alone: Config = format!("host={h} hostaddr={a} port={p} {SETTINGS}").parse().unwrap();
            // Debug prints every field but these two: a setting one_host forgot
            // would differ here.
            let one = one_host(&many, i);
            assert_eq!(format!("{one:?}"), format!("{alone:?}"));
            assert_eq!(one.get_password(), alone.get_password());
            assert_eq!(one.get_ssl_negotiation(), alone.get_ssl_negotiation());
        }
    }

    #[test]
    fn lists_that_do_not_match_are_left_whole_for_tokio_postgres_to_refuse() {
        let two_ports_three_hosts: Config = "host=a,b,c port=1,2 user=u".parse().unwrap();
        assert_eq!(each(&two_ports_three_hosts).len(), 1);
        let three_addrs_two_hosts: Config = "host=a,b hostaddr=127.0.0.1,127.0.0.2,127.0.0.3 user=u".parse().unwrap();
        assert_eq!(each(&three_addrs_two_hosts).len(), 1);
        assert_eq!(each(&"host=a,b,c port=1,2,3 user=u".parse().unwrap()).len(), 3);
    }

    #[test]
    fn one_port_serves_every_host() {
        let many: Config = "host=h1,h2 port=6000 user=u".parse().unwrap();
        assert_eq!(one_host(&many, 1).get_ports(), &[6000]);
        assert_eq!(one_host(&many, 1).get_hosts(), &[Host::Tcp("h2".into())]);
    }
}
