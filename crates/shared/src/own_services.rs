//! Hookgate's own servers, its Postgres and its Redis: never a tenant's endpoint or destination, whatever an allow-list opens.
//!
//! An operator who opens a network to tenants (the quickstart's `127.0.0.1/32`)
//! would otherwise open the control plane's database with it: a Postgres
//! destination aimed there could write into Hookgate's own tables. The hosts and
//! ports of `DATABASE_URL` and of every Redis URL are resolved, and an address
//! that is one of them, port included, is refused at creation and again at the
//! very address dialled. A Postgres host given with its `hostaddr` is that
//! address: libpq dials it and never resolves the name, so neither does this.
//!
//! A server on this machine is reached at any of its local addresses (a loopback
//! one, `0.0.0.0`, an interface's), whichever it was configured by: when one of
//! Hookgate's servers is local, every local address at its port is refused.
//!
//! A name is resolved again a minute after it answered, and a second after it
//! did not (then two, four, … up to a minute). One that stops answering keeps the
//! addresses it had. One that has never answered (a DNS outage at start, a name
//! that does not exist) keeps its port refused at every address that is not
//! public (loopback, private, link-local, …: what a tenant reaches only through
//! an allow-list) until it does: where that server is is unknown, so the check
//! fails closed where Hookgate's servers are in practice. A public address at
//! that port stays open to tenants, as it is to every tenant without the check.
//! Such a name is logged as a warning at each try and counted in
//! `hookgate_own_servers_unresolved`. A configured name that can never resolve
//! (a Sentinel or a Cluster seed taken away and left in `REDIS_URL`) thus keeps
//! its port closed on the networks the allow-lists open until it is taken out
//! of the configuration.

use std::{
    collections::{BTreeSet, HashSet},
    net::{IpAddr, SocketAddr, UdpSocket},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use futures_util::future::BoxFuture;

/// How the configured names become addresses: the system's resolver, or a test's.
pub type Lookup = Arc<dyn Fn(String, u16) -> BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> + Send + Sync>;

/// A [`Lookup`] that may be absent (the system's resolver then), shown by name only.
#[derive(Clone, Default)]
struct Resolver(Option<Lookup>);

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Resolver(given)" } else { "Resolver(system)" })
    }
}

impl Resolver {
    async fn lookup(&self, name: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        match &self.0 {
            Some(lookup) => lookup(name.to_owned(), port).await,
            None => Ok(tokio::net::lookup_host((name, port)).await?.collect()),
        }
    }
}

/// How long a resolution of the configured names is trusted before it is made
/// again (a server moved by DNS is refused at its new address within this).
const FRESH_FOR: Duration = Duration::from_secs(60);

/// How long one resolution of the configured names may take; past it, that name
/// has not answered.
const RESOLVE_WITHIN: Duration = Duration::from_secs(2);

/// When a name has not answered, it is asked again after this, then after twice
/// as long each time it does not, up to [`FRESH_FOR`].
const RETRY_FIRST: Duration = Duration::from_secs(1);

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
    /// When the names are to be resolved again; `None` before the first time.
    due: Option<Instant>,
    /// How long the last round that left a name unanswered waited (zero after a round that did not).
    retry: Duration,
    /// Each target's addresses as last answered; `None`, a name that never has.
    answered: Vec<Option<Vec<SocketAddr>>>,
    addrs: HashSet<SocketAddr>,
    /// Ports of servers of this machine: any local address at them is one.
    local_ports: BTreeSet<u16>,
    /// Ports of names that have never answered: every address at them that is
    /// not public is refused until they do (fail closed: where such a server
    /// is, is unknown).
    unanswered_ports: BTreeSet<u16>,
}

/// The addresses of Hookgate's own servers.
#[derive(Debug, Default)]
pub struct OwnServices {
    targets: Vec<(Host, u16)>,
    known: RwLock<Known>,
    resolving: tokio::sync::Mutex<()>,
    resolver: Resolver,
    /// How many configured names have never answered, for the metrics.
    unresolved: Option<prometheus::IntGauge>,
}

impl OwnServices {
    /// Hookgate's Postgres (`DATABASE_URL`, every host it lists) and Redis (every
    /// URL of `REDIS_URL`: the node, the Cluster's seeds, the Sentinels).
    pub fn from_config(config: &crate::Config) -> Self {
        // The replica is Hookgate's database too: no endpoint may reach it either.
        let mut databases = vec![config.database_url.as_str()];
        databases.extend(config.database_replica_url.as_deref());
        Self::of(&databases, config.redis_url.as_deref().unwrap_or_default())
    }

    /// From Postgres connection strings and a comma-separated list of Redis URLs.
    pub fn of(database_urls: &[&str], redis_urls: &str) -> Self {
        Self::resolving_with(database_urls, redis_urls, None)
    }

    /// [`OwnServices::of`], the names resolved by `lookup` (a test's) or, without
    /// one, by the system.
    pub fn resolving_with(database_urls: &[&str], redis_urls: &str, lookup: Option<Lookup>) -> Self {
        let mut targets = Vec::new();
        for url in database_urls {
            targets.extend(postgres_targets(url));
        }
        for url in redis_urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            targets.extend(redis_target(url));
        }
        OwnServices { targets, resolver: Resolver(lookup), ..Default::default() }
    }

    /// The same, setting `gauge` after each round to how many configured names
    /// have never answered (`hookgate_own_servers_unresolved`).
    pub fn reporting(self, gauge: prometheus::IntGauge) -> Self {
        OwnServices { unresolved: Some(gauge), ..self }
    }

    /// Resolves the configured names again when due: a minute after a round in
    /// which every name answered, a second after one in which a name did not (then
    /// two, four, … up to a minute). Each name is given two seconds; one that does
    /// not answer keeps the addresses it had, and one that never has keeps every
    /// address at its port that is not public refused. Only the first call waits for a round under
    /// way; later ones go on with what is known.
    pub async fn refresh(&self) {
        let is_due = |k: &Known| k.due.is_none_or(|due| Instant::now() >= due);
        let first = {
            let known = self.known.read().expect("never poisoned");
            if !is_due(&known) {
                return;
            }
            known.due.is_none()
        };
        let _one = match first {
            true => self.resolving.lock().await,
            false => match self.resolving.try_lock() {
                Ok(one) => one,
                Err(_) => return,
            },
        };
        let (before, retry) = {
            let known = self.known.read().expect("never poisoned");
            if !is_due(&known) {
                return;
            }
            (known.answered.clone(), known.retry)
        };
        let lookups = self.targets.iter().map(|(host, port)| async move {
            match host {
                Host::Name(name) => {
                    let found = tokio::time::timeout(RESOLVE_WITHIN, self.resolver.lookup(name, *port));
                    match found.await {
                        Ok(Ok(addrs)) => Some(addrs),
                        _ => None,
                    }
                }
                Host::Ip(ip) => Some(vec![SocketAddr::new(*ip, *port)]),
                Host::Local => Some(Vec::new()),
            }
        });
        let answers = futures_util::future::join_all(lookups).await;
        let mut fresh = Known::default();
        let mut unanswered = false;
        let mut never = 0;
        for (i, ((host, port), answer)) in self.targets.iter().zip(answers).enumerate() {
            if *host == Host::Local {
                fresh.local_ports.insert(*port);
            }
            unanswered |= answer.is_none();
            // Not answered now: the addresses it had before stay refused.
            let addrs = answer.or_else(|| before.get(i).cloned().flatten());
            match &addrs {
                Some(addrs) => {
                    for a in addrs {
                        let a = SocketAddr::new(crate::networks::canonical(a.ip()), a.port());
                        if is_local(a.ip()) {
                            fresh.local_ports.insert(a.port());
                        }
                        fresh.addrs.insert(a);
                    }
                }
                None => {
                    tracing::warn!(
                        host = ?host,
                        port,
                        "a host of DATABASE_URL or REDIS_URL has never resolved: every address at its port that is not \
                         public (loopback, private, …) is refused to endpoints and destinations until it does"
                    );
                    fresh.unanswered_ports.insert(*port);
                    never += 1;
                }
            }
            fresh.answered.push(addrs);
        }
        fresh.retry = match unanswered {
            true => (retry * 2).clamp(RETRY_FIRST, FRESH_FOR),
            false => Duration::ZERO,
        };
        fresh.due = Some(Instant::now() + if unanswered { fresh.retry } else { FRESH_FOR });
        *self.known.write().expect("never poisoned") = fresh;
        if let Some(gauge) = &self.unresolved {
            gauge.set(never);
        }
    }

    /// Whether dialling `addr` would reach one of Hookgate's own servers, as last
    /// resolved (call [`OwnServices::refresh`] first). IPv4 carried in IPv6 is
    /// judged as the IPv4 address, as the allow-lists judge it. At the port of a
    /// name never resolved, every address that is not public is held.
    pub fn holds(&self, addr: SocketAddr) -> bool {
        let ip = crate::networks::canonical(addr.ip());
        let known = self.known.read().expect("never poisoned");
        known.addrs.contains(&SocketAddr::new(ip, addr.port()))
            || (known.unanswered_ports.contains(&addr.port()) && crate::networks::classify(ip).is_some())
            || (known.local_ports.contains(&addr.port()) && is_local(ip))
    }
}

/// Whether an address is this machine's: loopback, unspecified (which Linux dials
/// as loopback), or one an interface holds (binding to it succeeds; nothing is sent).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Every host and port a Postgres connection string names (libpq's lists: one
/// port for all hosts, or one each). A host with a `hostaddr` (the lists pair up
/// by position) is dialled at that address, its name never resolved (it serves
/// TLS and the password file): the address counts, the name does not.
fn postgres_targets(url: &str) -> Vec<(Host, u16)> {
    let Ok((url, _)) = crate::db::tls::split(url) else { return Vec::new() };
    let Ok(config) = url.parse::<tokio_postgres::Config>() else { return Vec::new() };
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hostaddrs = config.get_hostaddrs();
    let mut targets: Vec<(Host, u16)> = config
        .get_hosts()
        .iter()
        .enumerate()
        .filter(|(i, _)| hostaddrs.get(*i).is_none())
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

/// A Redis URL's host and port (6379 unless given). A Unix socket's server is
/// this machine's, counted at Redis's default port, 6379, as a Postgres socket
/// directory's is at its port: it may listen on TCP too.
fn redis_target(url: &str) -> Option<(Host, u16)> {
    let url = url::Url::parse(url).ok()?;
    if matches!(url.scheme(), "unix" | "redis+unix" | "valkey+unix") {
        return Some((Host::Local, 6379));
    }
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

    /// A resolver whose names answer one at a time from `answers` (an error where
    /// `None`), the first one after `slow_first` if given; then the last answer.
    fn answering(answers: Vec<Option<&'static str>>, slow_first: Option<Duration>) -> Lookup {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Arc::new(move |_name: String, port: u16| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = answers[n.min(answers.len() - 1)];
            let wait = slow_first.filter(|_| n == 0);
            Box::pin(async move {
                if let Some(wait) = wait {
                    tokio::time::sleep(wait).await;
                }
                match answer {
                    Some(ip) => Ok(vec![SocketAddr::new(ip.parse().unwrap(), port)]),
                    None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no answer")),
                }
            })
        })
    }

    #[tokio::test]
    async fn a_name_that_has_not_resolved_keeps_its_port_closed_and_is_asked_again_within_seconds() {
        // Values only: no address here is dialled.
        for (first, slow) in [(None, None), (Some("10.9.8.6"), Some(RESOLVE_WITHIN + Duration::from_millis(300)))] {
            let lookup = answering(vec![first, Some("10.9.8.7")], slow);
            let gauge = prometheus::IntGauge::new("unresolved", "test").unwrap();
            let own = OwnServices::resolving_with(&["postgres://u@db.internal:5433/db"], "", Some(lookup))
                .reporting(gauge.clone());
            own.refresh().await;
            assert!(own.holds(at("10.1.1.1:5433")), "not resolved yet: every private address at its port is refused");
            assert_eq!(gauge.get(), 1);
            assert!(!own.holds(at("10.1.1.1:5434")), "another port");
            tokio::time::sleep(Duration::from_millis(1100)).await;
            own.refresh().await;
            assert!(own.holds(at("10.9.8.7:5433")), "resolved at the next try, a second later");
            assert!(!own.holds(at("10.1.1.1:5433")), "and only its address is refused now");
            assert_eq!(gauge.get(), 0, "no longer counted once it has answered");
        }
    }

    /// A resolver that answers no name, counting the names it was asked.
    fn never_answering() -> (Lookup, Arc<std::sync::Mutex<Vec<String>>>) {
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = asked.clone();
        let lookup: Lookup = Arc::new(move |name: String, _port: u16| {
            seen.lock().unwrap().push(name);
            Box::pin(async { Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")) })
        });
        (lookup, asked)
    }

    /// libpq dials a host's `hostaddr` and never resolves its name (kept for TLS
    /// and the password file; it may be in no DNS by design). Before, the name
    /// was resolved, never answered, and closed its port at every address.
    #[tokio::test]
    async fn a_host_name_given_with_its_hostaddr_is_not_resolved_and_closes_no_port() {
        // Values only: no address here is dialled.
        for url in [
            "postgres://u@db.internal:5432/db?hostaddr=10.0.0.5",
            "host=db.internal,replica.internal hostaddr=10.0.0.5,10.0.0.6 port=5432,5433 user=u dbname=db",
        ] {
            let (lookup, asked) = never_answering();
            let own = OwnServices::resolving_with(&[url], "", Some(lookup));
            own.refresh().await;
            assert!(asked.lock().unwrap().is_empty(), "{url}: resolved {:?}", asked.lock().unwrap());
            assert!(own.holds(at("10.0.0.5:5432")), "{url}: the address dialled");
            for free in ["10.1.1.1:5432", "127.0.0.1:5432", "10.0.0.5:5433"] {
                assert!(!own.holds(at(free)), "{url}: {free} is not the server");
            }
        }
        let own = OwnServices::of(&["host=db.internal,replica.internal hostaddr=10.0.0.5,10.0.0.6 port=5432,5433"], "");
        own.refresh().await;
        assert!(own.holds(at("10.0.0.6:5433")), "each hostaddr at its own port");
    }

    /// A name that has never resolved (a DNS blip at start, a Cluster seed
    /// taken out of DNS but left in `REDIS_URL`) closes its port where one of
    /// Hookgate's servers could be, at non-public addresses (loopback, private:
    /// a tenant reaches those only through an allow-list), and not at public
    /// ones, which stay open to every tenant. Before, every address at the port
    /// was refused, public ones included.
    #[tokio::test]
    async fn a_name_never_resolved_closes_its_port_only_at_addresses_that_are_not_public() {
        let (lookup, _) = never_answering();
        let gauge = prometheus::IntGauge::new("unresolved", "test").unwrap();
        let own = OwnServices::resolving_with(
            &[],
            "redis://seed-3.cache.internal:6379/, redis://10.9.8.7:6379/",
            Some(lookup),
        )
        .reporting(gauge.clone());
        own.refresh().await;
        assert_eq!(gauge.get(), 1, "counted, besides the warning logged");
        for closed in ["10.1.1.1:6379", "127.0.0.1:6379", "[fd00::1]:6379", "[::ffff:192.168.1.9]:6379"] {
            assert!(own.holds(at(closed)), "{closed}: where the server could be, refused");
        }
        for open in ["8.8.8.8:6379", "[2606:4700::1111]:6379", "[::ffff:1.1.1.1]:6379", "10.1.1.1:6380"] {
            assert!(!own.holds(at(open)), "{open}: a public address, or another port");
        }
    }

    #[tokio::test]
    async fn a_name_that_stops_answering_keeps_its_addresses_and_is_asked_again_within_seconds() {
        let lookup = answering(vec![Some("10.9.8.7"), None, Some("10.9.8.8")], None);
        let own = OwnServices::resolving_with(&["postgres://u@db.internal:5433/db"], "", Some(lookup));
        own.refresh().await;
        assert!(own.holds(at("10.9.8.7:5433")));
        // Not yet due: a minute of trust after an answer.
        own.refresh().await;
        own.known.write().unwrap().due = Some(Instant::now());
        own.refresh().await;
        assert!(own.holds(at("10.9.8.7:5433")), "no answer: what it had stays");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        own.refresh().await;
        assert!(own.holds(at("10.9.8.8:5433")), "asked again a second after it failed, not a minute");
    }

    #[tokio::test]
    async fn ipv4_carried_in_ipv6_in_any_form_and_a_redis_socket_count_as_the_allow_list_judges_them() {
        let own = OwnServices::of(&["postgres://u@127.0.0.1:15433/db", "postgres://u@10.9.8.7:6390/db"], "");
        own.refresh().await;
        for held in
            ["[::127.0.0.1]:15433", "[::ffff:0:127.0.0.1]:15433", "[::10.9.8.7]:6390", "[::ffff:0:10.9.8.7]:6390"]
        {
            assert!(own.holds(at(held)), "{held}");
        }
        assert!(!own.holds(at("[::1:10.9.8.7]:6390")), "not an IPv4 address");
        for socket in ["unix:///run/redis/redis.sock", "redis+unix:///run/redis.sock", "valkey+unix:///v.sock"] {
            let own = OwnServices::of(&[], socket);
            own.refresh().await;
            assert!(own.holds(at("127.0.0.1:6379")) && own.holds(at("[::1]:6379")), "{socket}: at Redis's own port");
            assert!(!own.holds(at("127.0.0.1:6380")), "{socket}");
        }
    }
}
