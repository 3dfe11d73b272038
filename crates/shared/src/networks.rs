//! The networks a tenant's endpoints may reach past the SSRF guard: the
//! operator's `HOOKGATE_EGRESS_ALLOW_NETWORKS`, open to every tenant, and the
//! tenant's own `egressAllowNetworks`, which the operator assigns to it alone.
//! Read through the one-second cache (a tenant's change forgets it).

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::Arc,
};

use ipnet::IpNet;

use crate::{db, ids::TenantId, store::tenants, store::StoreError, AppState};

/// IPv6 that carries an IPv4 address is that IPv4 address: mapped
/// (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`, deprecated) and translated
/// (`::ffff:0:a.b.c.d`). How the SSRF guard judges an address against the lists
/// and how Hookgate's own servers are recognised, alike. `::` and `::1` are
/// themselves, not 0.0.0.0 and 0.0.0.1.
pub fn canonical(addr: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = addr else { return addr };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let v4 = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0, 0, 0] | [0, 0, 0, 0, 0, 0, 0, 1] => addr,
        [0, 0, 0, 0, 0, 0, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => IpAddr::V4(v4()),
        _ => addr,
    }
}

/// The class of a non-global address, or `None` for a global one: what the SSRF
/// guard refuses unless an allow-list opens it (egress's `ssrf` module).
pub fn classify(addr: IpAddr) -> Option<&'static str> {
    match canonical(addr) {
        IpAddr::V4(ip) => classify_v4(ip),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    Some(match o {
        _ if ip.is_unspecified() || o[0] == 0 => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        [100, b, ..] if (64..128).contains(&b) => "CGNAT",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() => "broadcast",
        [192, 0, 0, _] => "IETF protocol assignment",
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => "documentation",
        [198, b, ..] if b == 18 || b == 19 => "benchmarking",
        [192, 88, 99, _] => "6to4 relay anycast",
        [a, ..] if a >= 240 => "reserved",
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(match s {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_multicast() => "multicast",
        [a, ..] if a & 0xfe00 == 0xfc00 => "private (unique local)",
        [a, ..] if a & 0xffc0 == 0xfe80 => "link-local",
        [a, ..] if a & 0xffc0 == 0xfec0 => "site-local",
        [0x2001, 0xdb8, ..] | [0x3fff, 0..=0x0fff, ..] => "documentation",
        [0x64, 0xff9b, ..] => "NAT64",
        [0x5f00, ..] => "SRv6 segment identifiers",
        [0x2002, ..] => "6to4",
        [0x2001, b, ..] if b < 0x200 => "IETF protocol assignment",
        [0x100, 0, 0, 0, ..] => "discard-only",
        _ => return None,
    })
}

/// One refresh at a time per tenant (a tenant hashes to one of these): when its
/// entry expires, the deliveries in flight for it (a worker's hundred and more)
/// wait for one query rather than each taking a connection for the same answer,
/// and other tenants' refreshes do not queue behind it (one lock per process
/// made every tenant wait out one slow lookup).
static REFRESH: [tokio::sync::Mutex<()>; 64] = [const { tokio::sync::Mutex::const_new(()) }; 64];

/// Refreshes under way at once per process, whatever the tenants: with Postgres
/// slow, refreshes of many tenants must not take every pooled connection from
/// the claim and the recorder.
static REFRESHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

fn refresh_lock(tenant: &TenantId) -> &'static tokio::sync::Mutex<()> {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(tenant.as_str());
    &REFRESH[(h % REFRESH.len() as u64) as usize]
}

/// Both lists, merged and sorted (so one list is one key for the clients made per list).
pub async fn allowed(state: &AppState, tenant: &TenantId) -> Result<Arc<Vec<IpNet>>, StoreError> {
    if let Some(nets) = state.caches.networks.get(tenant) {
        return Ok(nets);
    }
    db::bounded(state.db_budget(), async {
        let _one = refresh_lock(tenant).lock().await;
        if let Some(nets) = state.caches.networks.get(tenant) {
            return Ok(nets);
        }
        let _slot = REFRESHING.acquire().await.expect("the semaphore is never closed");
        let conn = db::conn(&state.db).await?;
        let own = tenants::egress_networks(&**conn, tenant).await?;
        let nets = Arc::new(merged(&state.config.egress_allow_networks, &own));
        state.caches.networks.insert(tenant.clone(), nets.clone());
        Ok(nets)
    })
    .await
}

/// The operator's list and a tenant's (as stored: checked CIDRs; anything else is skipped).
pub fn merged(operator: &[IpNet], own: &[String]) -> Vec<IpNet> {
    let mut all = operator.to_vec();
    all.extend(own.iter().filter_map(|s| s.parse::<IpNet>().ok()));
    all.sort();
    all.dedup();
    all
}
