//! Short-lived in-process caches of hot lookups (a source by id, an API key by
//! hash), so that the hot paths do not pay a query per request.
//!
//! Entries live one second. Invalidation lives in one place: the store function
//! that changes a cached row takes the caches and forgets what it changed (a
//! source patched, a key revoked, a tenant disabled), so no handler has to
//! remember to. A change made through another instance takes effect here within
//! the second. Forgetting happens when the statement ran, before a surrounding
//! transaction commits; a read in between may cache the old row for one second,
//! exactly as a change made elsewhere would be seen.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use crate::{
    ids::{ApiKeyId, SourceId, TenantId},
    store::sources::Source,
};

const TTL: Duration = Duration::from_secs(1);
/// Past this many entries, expired ones are dropped, and if that is not enough the
/// cache is emptied rather than grown.
const MAX_ENTRIES: usize = 100_000;

/// A map whose entries expire after [`TTL`]. Cheap to clone.
pub struct TtlCache<K, V> {
    map: Arc<RwLock<HashMap<K, (Instant, V)>>>,
    ttl: Duration,
}

impl<K, V> Clone for TtlCache<K, V> {
    fn clone(&self) -> Self {
        TtlCache { map: self.map.clone(), ttl: self.ttl }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache::with_ttl(TTL)
    }
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    pub fn with_ttl(ttl: Duration) -> Self {
        TtlCache { map: Arc::new(RwLock::new(HashMap::new())), ttl }
    }

    pub fn get(&self, k: &K) -> Option<V> {
        let map = self.map.read().expect("cache lock is never poisoned");
        map.get(k).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, v)| v.clone())
    }

    pub fn insert(&self, k: K, v: V) {
        let mut map = self.map.write().expect("cache lock is never poisoned");
        if map.len() >= MAX_ENTRIES {
            // Bounded: expired entries go first (a flood of unknown ids lives one
            // second), and only a flood within one second empties the cache.
            let ttl = self.ttl;
            map.retain(|_, (at, _)| at.elapsed() < ttl);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(k, (Instant::now(), v));
    }

    /// Inserts, making room by evicting one entry when the map is full of live
    /// ones: for sets that must not be emptied (nor frozen full) by whoever can
    /// add to them.
    pub fn insert_evicting(&self, k: K, v: V) {
        let mut map = self.map.write().expect("cache lock is never poisoned");
        if map.len() >= MAX_ENTRIES && !map.contains_key(&k) {
            let ttl = self.ttl;
            map.retain(|_, (at, _)| at.elapsed() < ttl);
            if map.len() >= MAX_ENTRIES {
                // Whichever the map yields first: an arbitrary one.
                if let Some(old) = map.keys().next().cloned() {
                    map.remove(&old);
                }
            }
        }
        map.insert(k, (Instant::now(), v));
    }

    pub fn remove(&self, k: &K) {
        self.map.write().expect("cache lock is never poisoned").remove(k);
    }

    pub fn clear(&self) {
        self.map.write().expect("cache lock is never poisoned").clear();
    }
}

/// How long a key or source found live lets its lookups skip the pre-auth gate
/// (each lookup still checks it: this only decides which queue it waits in).
const KNOWN_FOR: Duration = Duration::from_secs(86_400);

/// The caches of one process.
#[derive(Clone)]
pub struct Caches {
    /// `/in/{source_id}` → the live source, or `None` for an unknown one.
    pub sources: TtlCache<SourceId, Option<Arc<Source>>>,
    /// API key hash → (tenant, key id) of a live key, or `None`.
    pub keys: TtlCache<Vec<u8>, Option<(TenantId, ApiKeyId)>>,
    /// Tenant → its quotas in effect (the operator's defaults under its own).
    pub quotas: TtlCache<TenantId, crate::quota::Quotas>,
    /// API key hashes found live in the last day: their lookups (still made
    /// every second, so a revocation takes effect as fast) skip the pre-auth
    /// gate that unknown keys queue at. Only a live key is added, and a full set
    /// evicts one entry for each new one (never emptied), so a flood of unknown
    /// ones neither grows it nor delays those in it.
    pub known_keys: TtlCache<Vec<u8>, ()>,
    /// Source ids found live in the last day, likewise.
    pub known_sources: TtlCache<SourceId, ()>,
    /// The keys of portal tokens found live in the last day, likewise.
    pub known_key_ids: TtlCache<ApiKeyId, ()>,
    /// Whether a portal token's key is live (not revoked, its tenant enabled).
    pub portal_keys: TtlCache<ApiKeyId, bool>,
    /// Integration key hash → who it acts for, or `None` for no live key.
    pub integration_keys: TtlCache<Vec<u8>, Option<Arc<crate::store::integrations::KeyHolder>>>,
    /// Portal token id → whether no revocation refuses it.
    pub portal_tokens: TtlCache<String, bool>,
    /// Tenant → the networks its endpoints may reach (the operator's and its own).
    pub networks: TtlCache<TenantId, Arc<Vec<ipnet::IpNet>>>,
}

impl Default for Caches {
    fn default() -> Self {
        Caches {
            sources: TtlCache::default(),
            keys: TtlCache::default(),
            quotas: TtlCache::default(),
            known_keys: TtlCache::with_ttl(KNOWN_FOR),
            known_sources: TtlCache::with_ttl(KNOWN_FOR),
            known_key_ids: TtlCache::with_ttl(KNOWN_FOR),
            portal_keys: TtlCache::default(),
            portal_tokens: TtlCache::default(),
            integration_keys: TtlCache::default(),
            networks: TtlCache::default(),
        }
    }
}

/// What the stores forget (`store::Forget`): only the stores call these.
impl crate::store::Forget for Caches {
    fn forget_source(&self, id: &SourceId) {
        self.sources.remove(id);
    }

    /// An application's deletion takes its sources with it.
    fn forget_sources(&self) {
        self.sources.clear();
    }

    /// Keys are cached by hash, not id: a revocation forgets them all.
    fn forget_keys(&self) {
        self.keys.clear();
        self.portal_keys.clear();
        // Integration keys live while the API key that made them does.
        self.integration_keys.clear();
    }

    fn forget_integration_keys(&self) {
        self.integration_keys.clear();
    }

    fn forget_portal_tokens(&self) {
        self.portal_tokens.clear();
    }

    /// A tenant's change (disabled, deleted) reaches its sources and its keys.
    fn forget_tenant(&self) {
        self.sources.clear();
        self.keys.clear();
        self.portal_keys.clear();
        self.integration_keys.clear();
        self.quotas.clear();
        self.networks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_clear() {
        let c: TtlCache<u8, u8> = TtlCache::default();
        c.insert(1, 10);
        assert_eq!(c.get(&1), Some(10));
        c.clear();
        assert_eq!(c.get(&1), None);
        c.insert(2, 20);
        std::thread::sleep(TTL + Duration::from_millis(20));
        assert_eq!(c.get(&2), None, "expired");
    }
}
