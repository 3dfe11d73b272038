//! Short-lived in-process caches of hot lookups (a source by id, an API key by
//! hash), so that the hot paths do not pay a query per request.
//!
//! Entries live one second. A change made through this process (a source patched,
//! a key revoked, a tenant disabled) clears them at once; a change made through
//! another instance takes effect here within that second.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

const TTL: Duration = Duration::from_secs(1);
/// Past this many entries the cache is emptied rather than grown.
const MAX_ENTRIES: usize = 100_000;

/// A map whose entries expire after [`TTL`]. Cheap to clone.
pub struct TtlCache<K, V> {
    map: Arc<RwLock<HashMap<K, (Instant, V)>>>,
}

impl<K, V> Clone for TtlCache<K, V> {
    fn clone(&self) -> Self {
        TtlCache { map: self.map.clone() }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache { map: Arc::new(RwLock::new(HashMap::new())) }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    pub fn get(&self, k: &K) -> Option<V> {
        let map = self.map.read().expect("cache lock is never poisoned");
        map.get(k).filter(|(at, _)| at.elapsed() < TTL).map(|(_, v)| v.clone())
    }

    pub fn insert(&self, k: K, v: V) {
        let mut map = self.map.write().expect("cache lock is never poisoned");
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(k, (Instant::now(), v));
    }

    pub fn clear(&self) {
        self.map.write().expect("cache lock is never poisoned").clear();
    }
}

/// The caches of one process.
#[derive(Clone, Default)]
pub struct Caches {
    /// `/in/{source_id}` → the live source, or `None` for an unknown one.
    pub sources: TtlCache<String, Option<crate::store::sources::Source>>,
    /// API key hash → (tenant, key id) of a live key, or `None`.
    pub keys: TtlCache<Vec<u8>, Option<(crate::ids::TenantId, crate::ids::ApiKeyId)>>,
}

impl Caches {
    /// After any change to tenants, keys or sources made through this process.
    pub fn clear(&self) {
        self.sources.clear();
        self.keys.clear();
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
