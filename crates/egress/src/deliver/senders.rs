//! The HTTP clients deliveries go through: one per allow-list of networks (the
//! guard lives in a client's resolver), and one per endpoint with a client
//! certificate or server CA of its own.

use std::{sync::Arc, time::Duration};

use super::send::Sender;
use crate::ssrf::Guard;

/// One client per allow-list: the guard lives in a client's resolver, so a
/// tenant given private networks of its own is sent through a client of its own
/// (made once, kept); every other tenant shares the operator's.
pub struct Senders {
    base: Sender,
    /// Clients of endpoints with a client certificate or server CA of their own,
    /// by tenant networks, endpoint and the settings' time.
    with_tls: std::sync::Mutex<std::collections::HashMap<TlsKey, Sender>>,
    base_allow: Vec<ipnet::IpNet>,
    made: std::sync::Mutex<std::collections::HashMap<Vec<ipnet::IpNet>, Sender>>,
    settings: (Duration, Duration, Option<String>, bool),
    own: Arc<hookgate_shared::own_services::OwnServices>,
}

/// Clients kept for tenants' own lists; past it they are made again as needed.
const MOST_CLIENTS: usize = 64;
/// Clients kept for endpoints' own TLS settings (each has its own connections).
const MOST_TLS_CLIENTS: usize = 512;

type TlsKey = (Vec<ipnet::IpNet>, crate::auth::tokens::EndpointKey, chrono::DateTime<chrono::Utc>);

impl Senders {
    /// `own`: Hookgate's own servers, refused by every client made here.
    pub fn new(config: &hookgate_shared::Config, own: Arc<hookgate_shared::own_services::OwnServices>) -> Self {
        let settings = (
            config.egress_connect_timeout,
            config.egress_timeout,
            config.egress_proxy.clone(),
            config.egress_record_private_responses,
        );
        // Sorted and once each, as `networks::allowed` merges lists: equal lists compare equal.
        let base_allow = hookgate_shared::networks::merged(&config.egress_allow_networks, &[]);
        let guard = Guard::new(base_allow.clone()).protecting(own.clone());
        let base = Sender::new(guard, settings.0, settings.1, settings.2.as_deref(), settings.3);
        Senders { base, base_allow, made: Default::default(), with_tls: Default::default(), settings, own }
    }

    /// The client for a tenant's networks (from `hookgate_shared::networks::allowed`).
    pub fn for_networks(&self, allow: &[ipnet::IpNet]) -> Sender {
        if allow == self.base_allow.as_slice() {
            return self.base.clone();
        }
        let mut made = self.made.lock().expect("the senders lock is never poisoned");
        if let Some(s) = made.get(allow) {
            return s.clone();
        }
        if made.len() >= MOST_CLIENTS {
            made.clear();
        }
        let (connect, total, proxy, record) = &self.settings;
        let guard = Guard::new(allow.to_vec()).protecting(self.own.clone());
        let s = Sender::new(guard, *connect, *total, proxy.as_deref(), *record);
        made.insert(allow.to_vec(), s.clone());
        s
    }

    /// The client for an endpoint with its own TLS settings (`at`: when they last
    /// changed), within the tenant's networks; made once, kept (a bounded number).
    pub fn for_endpoint(
        &self,
        allow: &[ipnet::IpNet],
        endpoint: &crate::auth::tokens::EndpointKey,
        at: chrono::DateTime<chrono::Utc>,
        tls: &crate::auth::tls::Tls,
    ) -> Result<Sender, String> {
        let key = (allow.to_vec(), endpoint.clone(), at);
        if let Some(s) = self.with_tls.lock().expect("the senders lock is never poisoned").get(&key) {
            return Ok(s.clone());
        }
        let (connect, total, proxy, record) = &self.settings;
        let guard = Guard::new(allow.to_vec()).protecting(self.own.clone());
        let s = Sender::build(guard, *connect, *total, proxy.as_deref(), *record, None, Some(tls))?;
        let mut made = self.with_tls.lock().expect("the senders lock is never poisoned");
        if made.len() >= MOST_TLS_CLIENTS {
            made.clear();
        }
        made.insert(key, s.clone());
        Ok(s)
    }

    /// The operator's client: every tenant without networks of its own.
    pub fn base(&self) -> Sender {
        self.base.clone()
    }
}
