//! The outbound safety guard: endpoints may not reach loopback, private,
//! link-local, CGNAT, multicast or other non-global addresses, unless the
//! operator allow-lists the network (`HOOKGATE_EGRESS_ALLOW_NETWORKS`).
//!
//! It is applied twice: to IP-literal URLs before a request, and inside the HTTP
//! client's DNS resolver, so a name is checked on the addresses actually dialled
//! (no DNS rebinding between check and connect).
//!
//! Hookgate's own Postgres and Redis (`hookgate_shared::own_services`) are refused
//! whatever the allow-lists say: no list opens them. They are checked after the
//! lists, so an address a tenant may not reach anyway is refused with the
//! ordinary reason, and a tenant learns where they are only at an address its
//! lists open (where it could reach them but for this check).

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

// IPv6 that carries an IPv4 address (mapped, compatible, translated) is judged as
// that IPv4 address, as Hookgate's own servers are recognised. Other embeddings
// (NAT64, 6to4, Teredo) are refused as whole ranges by `classify_v6`.
use hookgate_shared::networks::canonical;
/// The class of a non-global address (one shared with Hookgate's own-server
/// check, which fails closed for a name never resolved only at such addresses).
pub use hookgate_shared::networks::classify;
use hookgate_shared::own_services::OwnServices;
use ipnet::IpNet;

/// The class of an address at a port that is one of Hookgate's own servers.
pub const OWN_SERVICE: &str = "Hookgate's own database or Redis";

/// Why an address may not be dialled.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{}", self.describe())]
pub struct Blocked {
    pub addr: IpAddr,
    pub class: &'static str,
    /// The tenant wrote the address (an IP literal); otherwise it came from DNS
    /// and is not repeated to the tenant: an internal address is no business of theirs.
    pub literal: bool,
}

impl Blocked {
    fn describe(&self) -> String {
        if self.class == OWN_SERVICE {
            let what = match self.literal {
                true => format!("{} at this port is", self.addr),
                false => "the host name resolves to".to_owned(),
            };
            return format!(
                "{what} {OWN_SERVICE}, which no endpoint or destination may reach (no allow-list opens it)"
            );
        }
        let what = if self.literal {
            format!("{} is a {} address", self.addr, self.class)
        } else {
            format!("the endpoint's host name resolves to a {} address", self.class)
        };
        format!("{what}, not allowed for endpoints (the operator may allow it with HOOKGATE_EGRESS_ALLOW_NETWORKS)")
    }
}

/// The guard with the operator's allow-list, and Hookgate's own servers.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    allow: Arc<Vec<IpNet>>,
    own: Arc<OwnServices>,
}

impl Guard {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Guard { allow: Arc::new(allow), own: Arc::default() }
    }

    /// The same guard, refusing Hookgate's own servers too (`AppState::own_services`).
    pub fn protecting(self, own: Arc<OwnServices>) -> Self {
        Guard { own, ..self }
    }

    /// Resolves the names of Hookgate's own servers again if that is due (at
    /// most two seconds); call it before [`Guard::check_dial`] and the checks built on it.
    pub async fn refresh_own(&self) {
        self.own.refresh().await;
    }

    /// `Ok` if this address may be dialled at this port: allowed by [`Guard::check`],
    /// and not one of Hookgate's own servers, whatever the allow-lists say.
    ///
    /// The lists first: an address they refuse gets the ordinary reason even where
    /// Hookgate's own server is, so a tenant cannot map the control plane by
    /// probing private addresses and names; only at an address its lists open is
    /// it told the address is Hookgate's own.
    pub fn check_dial(&self, addr: SocketAddr) -> Result<(), Blocked> {
        self.check(addr.ip())?;
        self.check_own(addr)
    }

    /// `Ok` unless this address at this port is one of Hookgate's own servers.
    pub fn check_own(&self, addr: SocketAddr) -> Result<(), Blocked> {
        match self.own.holds(addr) {
            true => Err(Blocked { addr: canonical(addr.ip()), class: OWN_SERVICE, literal: true }),
            false => Ok(()),
        }
    }

    /// `Ok` if the address may be dialled.
    pub fn check(&self, addr: IpAddr) -> Result<(), Blocked> {
        let addr = canonical(addr);
        if self.allow.iter().any(|n| n.contains(&addr)) {
            return Ok(());
        }
        match classify(addr) {
            None => Ok(()),
            Some(class) => Err(Blocked { addr, class, literal: true }),
        }
    }

    /// Checks a URL's host when it is an IP literal or `localhost`, at the URL's
    /// port; names are checked by the resolver at connect time.
    pub fn check_url(&self, url: &url::Url) -> Result<(), Blocked> {
        let port = url.port_or_known_default().unwrap_or(0);
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_dial(SocketAddr::new(IpAddr::V4(ip), port)),
            Some(url::Host::Ipv6(ip)) => self.check_dial(SocketAddr::new(IpAddr::V6(ip), port)),
            // Judged as 127.0.0.1 (what an allow-list names); then refused if either
            // loopback address at this port is one of Hookgate's own servers.
            Some(url::Host::Domain(d)) if is_localhost(d) => {
                let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
                self.check_dial(v4)?;
                self.check_own(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port))
            }
            _ => Ok(()),
        }
    }

    /// Keeps the allowed addresses of a resolution, or says why none is.
    pub fn filter(&self, addrs: impl IntoIterator<Item = SocketAddr>) -> Result<Vec<SocketAddr>, Blocked> {
        let mut first_block = None;
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match self.check_dial(*a) {
                Ok(()) => true,
                Err(b) => {
                    // Hookgate's own server is the reason said, if it is one (only
                    // an address the lists let through is ever called that).
                    let b = Blocked { literal: false, ..b };
                    if b.class == OWN_SERVICE || first_block.is_none() {
                        first_block = Some(b);
                    }
                    false
                }
            })
            .collect();
        match (allowed.is_empty(), first_block) {
            (true, Some(b)) => Err(b),
            _ => Ok(allowed),
        }
    }
}

/// `localhost` and its subdomains, with or without the root's trailing dot.
fn is_localhost(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Resolves names and drops the addresses the guard refuses, so the check holds
/// for the very address that is dialled. The operator's proxy is exempt: it is
/// usually on a private network by design.
pub(crate) struct GuardedResolver {
    pub(crate) guard: Guard,
    pub(crate) proxy_host: Option<String>,
    /// The system's resolver unless a test gives its own (`Sender::resolving_with`).
    pub(crate) lookup: Option<hookgate_shared::own_services::Lookup>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let exempt = self.proxy_host.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(name.as_str()));
        let lookup = self.lookup.clone();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = match lookup {
                Some(lookup) => lookup(name.as_str().to_owned(), 0).await?,
                None => tokio::net::lookup_host((name.as_str(), 0)).await?.collect(),
            };
            let allowed = if exempt { addrs } else { guard.filter(addrs)? };
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_blocked_range_is_classified_as_values_never_dialled() {
        for (addr, class) in [
            ("10.0.0.1", "private"),
            ("172.16.5.4", "private"),
            ("192.168.1.1", "private"),
            ("127.0.0.1", "loopback"),
            ("127.0.0.2", "loopback"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.254", "CGNAT"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.10", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "private (unique local)"),
            ("fc00::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("2001:db8::1", "documentation"),
            ("64:ff9b::a00:1", "NAT64"),
            ("64:ff9b:1::a00:1", "NAT64"),
            ("::10.0.0.1", "private"),
            ("::ffff:0:10.0.0.1", "private"),
            ("::ffff:0:127.0.0.1", "loopback"),
            ("::169.254.169.254", "link-local"),
            ("2002:a00:1::1", "6to4"),
            ("2001::1", "IETF protocol assignment"),
            ("192.88.99.1", "6to4 relay anycast"),
            ("3fff::1", "documentation"),
            ("5f00::1", "SRv6 segment identifiers"),
            ("100::1", "discard-only"),
        ] {
            assert_eq!(classify(ip(addr)), Some(class), "{addr}");
            assert!(Guard::default().check(ip(addr)).is_err(), "{addr}");
        }
    }

    #[test]
    fn global_addresses_pass() {
        for addr in ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "2606:4700::1111", "172.32.0.1"] {
            assert_eq!(classify(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn the_allow_list_opens_only_its_networks() {
        let g = Guard::new(vec!["127.0.0.1/32".parse().unwrap()]);
        assert!(g.check(ip("127.0.0.1")).is_ok());
        let err = g.check(ip("127.0.0.2")).unwrap_err();
        assert_eq!(err.class, "loopback");
        assert!(err.to_string().contains("HOOKGATE_EGRESS_ALLOW_NETWORKS"));
        assert!(g.check(ip("::1")).is_err());
    }

    #[test]
    fn a_refusal_names_a_literal_address_but_never_a_resolved_one() {
        let g = Guard::default();
        assert!(g.check(ip("10.1.2.3")).unwrap_err().to_string().contains("10.1.2.3"));
        let resolved = g.filter(vec!["10.1.2.3:80".parse().unwrap()]).unwrap_err().to_string();
        assert!(!resolved.contains("10.1.2.3") && resolved.contains("private"), "{resolved}");
    }

    #[test]
    fn urls_with_blocked_literals_or_localhost_are_refused() {
        let g = Guard::default();
        let urls = ["http://127.0.0.2:9/x", "http://[::1]:9/", "http://localhost:9/", "http://a.localhost/"];
        for u in
            urls.into_iter().chain(["http://LOCALHOST.:9/", "http://[::ffff:0:127.0.0.1]/", "http://[::127.0.0.1]/"])
        {
            assert!(g.check_url(&u.parse().unwrap()).is_err(), "{u}");
        }
        assert!(g.check_url(&"https://example.com/hook".parse().unwrap()).is_ok());
    }

    #[tokio::test]
    async fn no_allow_list_opens_hookgates_own_database_or_redis_at_their_ports() {
        let own = OwnServices::of(&["postgres://hookgate@127.0.0.1:15433/hookgate"], "redis://127.0.0.1:16380/");
        let g = Guard::new(vec!["127.0.0.0/8".parse().unwrap()]).protecting(Arc::new(own));
        g.refresh_own().await;
        let at = |s: &str| -> SocketAddr { s.parse().unwrap() };
        for held in ["127.0.0.1:15433", "127.0.0.9:16380"] {
            let b = g.check_dial(at(held)).unwrap_err();
            assert!(b.to_string().contains("Hookgate's own database or Redis"), "{held}: {b}");
        }
        assert!(g.check_dial(at("127.0.0.1:8080")).is_ok(), "another port of an allowed network");
        for u in ["http://localhost:16380/", "http://127.0.0.1:15433/x", "https://[::1]:15433/"] {
            assert!(g.check_url(&u.parse().unwrap()).is_err(), "{u}");
        }
        assert!(g.check_url(&"http://localhost:8080/".parse().unwrap()).is_ok());
        let kept = g.filter(vec![at("127.0.0.1:15433"), at("127.0.0.1:9")]).unwrap();
        assert_eq!(kept, vec![at("127.0.0.1:9")], "the own server's address is dropped from a resolution");
        let only = g.filter(vec![at("127.0.0.1:15433")]).unwrap_err().to_string();
        assert!(only.contains("resolves to Hookgate's own") && !only.contains("127.0.0.1"), "{only}");
    }

    #[test]
    fn resolution_keeps_allowed_addresses_and_names_the_block_otherwise() {
        let g = Guard::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let both: Vec<SocketAddr> = vec!["127.0.0.1:80".parse().unwrap(), "[::1]:80".parse().unwrap()];
        assert_eq!(g.filter(both).unwrap(), vec!["127.0.0.1:80".parse().unwrap()]);
        let blocked = g.filter(vec!["10.1.2.3:80".parse().unwrap()]).unwrap_err();
        assert_eq!(blocked.addr, ip("10.1.2.3"));
    }

    #[tokio::test]
    async fn an_address_the_allow_list_refuses_gets_the_ordinary_reason_even_where_hookgates_own_server_is() {
        // Hookgate's servers on a private network and on loopback: values only, never dialled.
        let own = Arc::new(OwnServices::of(&["postgres://h@10.20.30.40:5432/db"], "redis://127.0.0.1:16380/"));
        let closed = Guard::default().protecting(own.clone());
        closed.refresh_own().await;
        let at = |s: &str| -> SocketAddr { s.parse().unwrap() };
        for (own, other) in [("10.20.30.40:5432", "10.20.30.41:5432"), ("127.0.0.1:16380", "127.0.0.1:16381")] {
            let (a, b) = (closed.check_dial(at(own)).unwrap_err(), closed.check_dial(at(other)).unwrap_err());
            assert_eq!((a.class, a.literal), (b.class, b.literal), "{own} is told apart from {other}: {a}");
            assert!(!a.to_string().contains(OWN_SERVICE), "{a}");
            let resolved = closed.filter(vec![at(own)]).unwrap_err();
            assert_eq!(resolved.to_string(), closed.filter(vec![at(other)]).unwrap_err().to_string());
        }
        for u in ["http://10.20.30.40:5432/", "http://localhost:16380/", "http://[::ffff:127.0.0.1]:16380/"] {
            let b = closed.check_url(&u.parse().unwrap()).unwrap_err();
            assert!(!b.to_string().contains(OWN_SERVICE), "{u}: {b}");
        }
        // Where the tenant's list would let it through, it is named for what it is.
        let open = Guard::new(vec!["10.20.30.0/24".parse().unwrap(), "127.0.0.1/32".parse().unwrap()]).protecting(own);
        for own in ["10.20.30.40:5432", "127.0.0.1:16380"] {
            assert_eq!(open.check_dial(at(own)).unwrap_err().class, OWN_SERVICE, "{own}");
        }
        assert_eq!(open.check_url(&"http://localhost:16380/".parse().unwrap()).unwrap_err().class, OWN_SERVICE);
    }
}
