//! Hookgate's own servers, its Postgres and its Redis: never a tenant's endpoint or destination, whatever an allow-list opens.
//!
//! An operator who opens a network to tenants (the quickstart's `127.0.0.1/32`)
//! would otherwise open the control plane's database with it: a Postgres
//! destination aimed there could write into Hookgate's own tables. The hosts and
//! ports of `DATABASE_URL` and of every Redis URL are resolved, and an address
//! that is one of them, port included, is refused at creation and again at the
//! very address dialled.
//!
//! A server on this machine is reached at any of its local addresses (a loopback
//! one, `0.0.0.0`, an interface's), whichever it was configured by: when one of
//! Hookgate's servers is local, every local address at its port is refused.

use std::{
    collections::{BTreeSet, HashSet},
    net::{IpAddr, SocketAddr, UdpSocket},
    sync::RwLock,
    time::{Duration, Instant},
};

/// How long a resolution of the configured names is trusted before it is made
/// again (a server moved by DNS is refused at its new address within this).
const FRESH_FOR: Duration = Duration::from_secs(60);

/// How long one resolution of the configured names may take; past it, what was
/// known stays.
const RESOLVE_WITHIN: Duration = Duration::from_secs(2);

/// Where a configured server is: a name, an address, or a Unix socket of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Name(String),
    Ip(IpAddr),
    /// A Unix socket: the server is local, and its TCP port (if it listens on one) is this.
    Local,
}

#[derive(Debug, Default)]
struct Known {
    at: Option<Instant>,
    addrs: HashSet<SocketAddr>,
    /// Ports of servers of this machine: any local address at them is one.
    local_ports: BTreeSet<u16>,
}

/// The addresses of Hookgate's own servers.
#[derive(Debug, Default)]
pub struct OwnServices {
    targets: Vec<(Host, u16)>,
    known: RwLock<Known>,
    resolving: tokio::sync::Mutex<()>,
}

impl OwnServices {
    /// Hookgate's Postgres (`DATABASE_URL`, every host it lists) and Redis (every
    /// URL of `REDIS_URL`: the node, the Cluster's seeds, the Sentinels).
    pub fn from_config(config: &crate::Config) -> Self {
        Self::of(&[config.database_url.as_str()], config.redis_url.as_deref().unwrap_or_default())
    }

    /// From Postgres connection strings and a comma-separated list of Redis URLs.
    pub fn of(database_urls: &[&str], redis_urls: &str) -> Self {
        let mut targets = Vec::new();
        for url in database_urls {
            targets.extend(postgres_targets(url));
        }
        for url in redis_urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            targets.extend(redis_target(url));
        }
        OwnServices { targets, ..Default::default() }
    }

    /// Resolves the configured names again when the last resolution is older than
    /// a minute, within two seconds; a name that does not answer keeps what it had.
    pub async fn refresh(&self) {
        if self.known.read().expect("never poisoned").at.is_some_and(|at| at.elapsed() < FRESH_FOR) {
            return;
        }
        let _one = self.resolving.lock().await;
        let old = {
            let known = self.known.read().expect("never poisoned");
            if known.at.is_some_and(|at| at.elapsed() < FRESH_FOR) {
                return;
            }
            known.addrs.clone()
        };
        let mut fresh = Known { at: Some(Instant::now()), ..Default::default() };
        let lookups = self.targets.iter().map(|(host, port)| async move {
            match host {
                Host::Name(name) => {
                    let found = tokio::time::timeout(RESOLVE_WITHIN, tokio::net::lookup_host((name.as_str(), *port)));
                    match found.await {
                        Ok(Ok(addrs)) => Some(addrs.collect::<Vec<_>>()),
                        _ => None,
                    }
                }
                Host::Ip(ip) => Some(vec![SocketAddr::new(*ip, *port)]),
                Host::Local => Some(Vec::new()),
            }
        });
        let answers = futures_util::future::join_all(lookups).await;
        for ((host, port), answer) in self.targets.iter().zip(answers) {
            if *host == Host::Local {
                fresh.local_ports.insert(*port);
            }
            // Not resolved now: the addresses it had before stay refused.
            let addrs = answer.unwrap_or_else(|| old.iter().filter(|a| a.port() == *port).copied().collect());
            for a in addrs {
                let a = SocketAddr::new(a.ip().to_canonical(), a.port());
                if is_local(a.ip()) {
                    fresh.local_ports.insert(a.port());
                }
                fresh.addrs.insert(a);
            }
        }
        *self.known.write().expect("never poisoned") = fresh;
    }

    /// Whether dialling `addr` would reach one of Hookgate's own servers, as last
    /// resolved (call [`OwnServices::refresh`] first).
    pub fn holds(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let known = self.known.read().expect("never poisoned");
        known.addrs.contains(&SocketAddr::new(ip, addr.port()))
            || (known.local_ports.contains(&addr.port()) && is_local(ip))
    }
}

/// Whether an address is this machine's: loopback, unspecified (which Linux dials
/// as loopback), or one an interface holds (binding to it succeeds; nothing is sent).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Every host and port a Postgres connection string names (libpq's lists: one
/// port for all hosts, or one each; `hostaddr` as well as `host`).
fn postgres_targets(url: &str) -> Vec<(Host, u16)> {
    let Ok((url, _)) = crate::db::tls::split(url) else { return Vec::new() };
    let Ok(config) = url.parse::<tokio_postgres::Config>() else { return Vec::new() };
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut targets: Vec<(Host, u16)> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| match h {
            tokio_postgres::config::Host::Tcp(name) => (host(name), port(i)),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(_) => (Host::Local, port(i)),
        })
        .collect();
    targets.extend(config.get_hostaddrs().iter().enumerate().map(|(i, ip)| (Host::Ip(*ip), port(i))));
    if targets.is_empty() {
        // No host: libpq's default, the local socket (and its TCP port, if it listens on one).
        targets.push((Host::Local, port(0)));
    }
    targets
}

/// A Redis URL's host and port (6379 unless given); a Unix socket has no port to refuse.
fn redis_target(url: &str) -> Option<(Host, u16)> {
    let url = url::Url::parse(url).ok()?;
    let port = url.port().unwrap_or(6379);
    match url.host()? {
        url::Host::Domain(d) => Some((host(d), port)),
        url::Host::Ipv4(ip) => Some((Host::Ip(IpAddr::V4(ip)), port)),
        url::Host::Ipv6(ip) => Some((Host::Ip(IpAddr::V6(ip)), port)),
    }
}

fn host(name: &str) -> Host {
    match name.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => Host::Ip(ip),
        Err(_) => Host::Name(name.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn the_database_and_redis_are_held_at_their_ports_and_a_local_one_at_every_local_address() {
        let own = OwnServices::of(
            &["postgres://hookgate@127.0.0.1:15433/hookgate?sslmode=disable"],
            "redis://localhost:16380/, rediss://10.9.8.7:6390/",
        );
        own.refresh().await;
        for held in ["127.0.0.1:15433", "127.0.0.2:15433", "0.0.0.0:15433", "[::1]:15433", "[::ffff:127.0.0.1]:15433"] {
            assert!(own.holds(at(held)), "{held}: the database, at a local address");
        }
        assert!(own.holds(at("127.0.0.1:16380")), "Redis, by a name that resolves to loopback");
        // An address only classified here, never dialled: a remote Redis at its port only.
        assert!(own.holds(at("10.9.8.7:6390")));
        for free in ["127.0.0.1:15434", "127.0.0.1:5432", "10.9.8.7:15433", "10.9.8.8:6390"] {
            assert!(!own.holds(at(free)), "{free}: another port or another host");
        }
    }

    #[tokio::test]
    async fn every_host_of_a_multi_host_url_and_a_socket_directory_count() {
        let own =
            OwnServices::of(&["postgres://u@10.0.0.1:5432,10.0.0.2:5433/db", "host=/var/run/postgresql port=6000"], "");
        own.refresh().await;
        assert!(own.holds(at("10.0.0.1:5432")) && own.holds(at("10.0.0.2:5433")));
        assert!(own.holds(at("127.0.0.1:6000")), "a server on a local socket listens on its TCP port too");
        assert!(!own.holds(at("10.0.0.1:5433")));
        assert!(!OwnServices::default().holds(at("127.0.0.1:5432")), "nothing configured, nothing held");
    }
}
