//! Where a destination dials (its hosts and ports), and the check when one is saved that none of them is Hookgate's own database or Redis.
//!
//! The same is checked again at every connect, on the address dialled
//! (`Dial::resolve`, and the HTTP client's connector): a name may resolve
//! elsewhere later. This check says so early, with a 422.
//!
//! Only where the tenant's allow-lists would let the address through: one they
//! refuse is left to the checks that refuse it anyway (an address literal's when
//! the configuration is parsed, a name's at connect time, both with the ordinary
//! reason), so a name or address that is Hookgate's own server answers as any
//! other private one does and the control plane cannot be mapped by saving.

use std::{net::SocketAddr, time::Duration};

use super::{
    config::Config,
    kind::{invalid, Invalid},
};
use crate::ssrf::Guard;

/// How long a name is given to resolve when a destination is saved; one that does
/// not is left to the check at connect time.
const RESOLVE_WITHIN: Duration = Duration::from_secs(2);

/// Refuses a destination that would reach Hookgate's own database or Redis (host
/// and port, names resolved within two seconds) at an address the tenant's lists
/// allow, naming the field.
pub async fn refuse_own(cfg: &Config, guard: &Guard) -> Result<(), Invalid> {
    refuse_own_resolving(cfg, guard, &super::system_lookup()).await
}

/// [`refuse_own`], names resolved by `lookup`.
async fn refuse_own_resolving(cfg: &Config, guard: &Guard, lookup: &super::Lookup) -> Result<(), Invalid> {
    guard.refresh_own().await;
    for (field, host, port) in cfg.dialled() {
        let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => match tokio::time::timeout(RESOLVE_WITHIN, lookup(host.clone(), port)).await {
                Ok(Ok(found)) => found,
                _ => Vec::new(),
            },
        };
        let literal = host.parse::<std::net::IpAddr>().is_ok();
        // `check_dial` says Hookgate's own only of an address the lists allow.
        let own = |a| guard.check_dial(a).err().filter(|b| b.class == crate::ssrf::OWN_SERVICE);
        if let Some(b) = addrs.into_iter().find_map(own) {
            let b = crate::ssrf::Blocked { literal, ..b };
            return Err(invalid(format!("`{field}` is refused: {b}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hookgate_shared::own_services::OwnServices;
    use serde_json::json;

    use super::*;
    use crate::ssrf::OWN_SERVICE;

    #[tokio::test]
    async fn a_name_is_refused_at_save_as_hookgates_own_server_only_where_the_tenant_could_reach_it() {
        // Hookgate's database on a private network, and names that resolve there: values only.
        let own = Arc::new(OwnServices::of(&["postgres://h@10.20.30.40:5432/db"], ""));
        let lookup: super::super::Lookup = Arc::new(|host: String, port: u16| {
            Box::pin(async move {
                match host.as_str() {
                    "control.internal" => Ok(vec![SocketAddr::from(([10, 20, 30, 40], port))]),
                    "other.internal" => Ok(vec![SocketAddr::from(([10, 20, 30, 41], port))]),
                    _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")),
                }
            })
        });
        let cfg = |host: &str| {
            let url = format!("postgres://u@{host}:5432/db");
            Config::parse("postgres", json!({"url": url, "tableName": "t"}), &Guard::default()).unwrap()
        };
        let closed = Guard::default().protecting(own.clone());
        for host in ["control.internal", "other.internal"] {
            let saved = refuse_own_resolving(&cfg(host), &closed, &lookup).await;
            assert!(saved.is_ok(), "{host}: told apart from any other private name: {:?}", saved.err().map(|e| e.0));
        }
        let open = Guard::new(vec!["10.20.30.0/24".parse().unwrap()]).protecting(own);
        let refused = refuse_own_resolving(&cfg("control.internal"), &open, &lookup).await.unwrap_err().0;
        assert!(refused.contains(OWN_SERVICE) && !refused.contains("10.20.30.40"), "{refused}");
        assert!(refuse_own_resolving(&cfg("other.internal"), &open, &lookup).await.is_ok());
    }
}
