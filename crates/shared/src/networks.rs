//! The networks a tenant's endpoints may reach past the SSRF guard: the
//! operator's `HOOKGATE_EGRESS_ALLOW_NETWORKS`, open to every tenant, and the
//! tenant's own `egressAllowNetworks`, which the operator assigns to it alone.
//! Read through the one-second cache (a tenant's change forgets it).

use std::sync::Arc;

use ipnet::IpNet;

use crate::{db, ids::TenantId, store::tenants, store::StoreError, AppState};

/// Both lists, merged and sorted (so one list is one key for the clients made per list).
pub async fn allowed(state: &AppState, tenant: &TenantId) -> Result<Arc<Vec<IpNet>>, StoreError> {
    if let Some(nets) = state.caches.networks.get(tenant) {
        return Ok(nets);
    }
    let own = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        tenants::egress_networks(&**conn, tenant).await
    })
    .await?;
    let nets = Arc::new(merged(&state.config.egress_allow_networks, &own));
    state.caches.networks.insert(tenant.clone(), nets.clone());
    Ok(nets)
}

/// The operator's list and a tenant's (as stored: checked CIDRs; anything else is skipped).
pub fn merged(operator: &[IpNet], own: &[String]) -> Vec<IpNet> {
    let mut all = operator.to_vec();
    all.extend(own.iter().filter_map(|s| s.parse::<IpNet>().ok()));
    all.sort();
    all.dedup();
    all
}
