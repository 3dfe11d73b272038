//! Where a destination dials (its hosts and ports), and the check when one is saved that none of them is Hookgate's own database or Redis.
//!
//! The same is checked again at every connect, on the address dialled
//! (`Dial::resolve`, and the HTTP client's connector): a name may resolve
//! elsewhere later. This check says so early, with a 422.

use std::{net::SocketAddr, time::Duration};

use super::config::{invalid, Config, Invalid};
use crate::ssrf::Guard;

/// How long a name is given to resolve when a destination is saved; one that does
/// not is left to the check at connect time.
const RESOLVE_WITHIN: Duration = Duration::from_secs(2);

impl Config {
    /// The hosts and ports a hand-over dials, with the field that names each
    /// (AWS's own hosts, when no `endpointUrl` is given, are left out).
    pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        let http = |field: &'static str, u: &str| {
            let url = url::Url::parse(u).ok()?;
            let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
            Some((field, host, url.port_or_known_default()?))
        };
        match self {
            Config::RabbitMq(r) => super::rabbitmq::parse_uri(&r.uri)
                .map(|u| vec![("uri", u.authority.host, u.authority.port)])
                .unwrap_or_default(),
            Config::Postgres(p) => {
                super::postgres::parse_url(&p.url).map(|t| vec![("url", t.host, t.port)]).unwrap_or_default()
            }
            Config::Sqs(q) => {
                [http("queueUrl", &q.queue_url), q.endpoint_url.as_deref().and_then(|u| http("endpointUrl", u))]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            Config::Sns(t) => t.endpoint_url.as_deref().and_then(|u| http("endpointUrl", u)).into_iter().collect(),
            Config::EventBridge(b) => {
                b.endpoint_url.as_deref().and_then(|u| http("endpointUrl", u)).into_iter().collect()
            }
            Config::AmazonS3(b) => b.endpoint_url.as_deref().and_then(|u| http("endpointUrl", u)).into_iter().collect(),
            Config::FifoEndpoint(f) => http("url", &f.url).into_iter().collect(),
            Config::PollingEndpoint(_) => Vec::new(),
        }
    }
}

/// Refuses a destination that would reach Hookgate's own database or Redis (host
/// and port, names resolved within two seconds), naming the field.
pub async fn refuse_own(cfg: &Config, guard: &Guard) -> Result<(), Invalid> {
    guard.refresh_own().await;
    for (field, host, port) in cfg.dialled() {
        let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => {
                match tokio::time::timeout(RESOLVE_WITHIN, tokio::net::lookup_host((host.as_str(), port))).await {
                    Ok(Ok(found)) => found.collect(),
                    _ => Vec::new(),
                }
            }
        };
        let literal = host.parse::<std::net::IpAddr>().is_ok();
        if let Some(b) = addrs.into_iter().find_map(|a| guard.check_own(a).err()) {
            let b = crate::ssrf::Blocked { literal, ..b };
            return Err(invalid(format!("`{field}` is refused: {b}")));
        }
    }
    Ok(())
}
