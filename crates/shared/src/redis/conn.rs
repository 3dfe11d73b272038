//! One Redis connection, to a single server, to the master a Redis Sentinel names,
//! or to a Redis Cluster, over TLS when the URL says `rediss://`. The redis crate
//! does the work: its connection manager reconnects a single server, its Sentinel
//! client asks the Sentinels where the master is, its cluster connection follows
//! `MOVED` and `ASK` and refreshes the slot map after a failover.

use std::time::Duration;

use base64::{engine::general_purpose::STANDARD, Engine};
use redis::{
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
    cluster::ClusterClientBuilder,
    cluster_async::ClusterConnection,
    Client, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, TlsCertificates, Value,
};

use super::sentinel::SentinelLookup;

/// Where Redis is, as configured.
#[derive(Debug, Clone, Default)]
pub struct RedisTarget {
    /// `REDIS_URL`; with `cluster`, seed nodes separated by commas.
    pub url: String,
    pub cluster: bool,
    /// With Sentinel: the name of the master the Sentinels in `url` watch.
    pub sentinel_master: Option<String>,
    /// With Sentinel: the Sentinels' own password, if they have one.
    pub sentinel_password: Option<String>,
    /// Extra roots for `rediss://` (`HOOKGATE_REDIS_CA_FILE`), trusted besides the system's.
    pub ca_file: Option<String>,
}

/// How to connect, built once per process (so the size of a variant is no matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum Connector {
    Single(Client),
    /// Asked on every connect, so that a connect after a failover finds the new master.
    Sentinel(SentinelLookup),
    Cluster(redis::cluster::ClusterClient),
}

impl Connector {
    pub(super) fn new(target: &RedisTarget, timeout: Duration) -> RedisResult<Self> {
        let certs = match &target.ca_file {
            Some(path) => Some(tls_roots(path)?),
            None => None,
        };
        let seeds = || -> RedisResult<Vec<redis::ConnectionInfo>> {
            target.url.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.into_connection_info()).collect()
        };
        if let Some(master) = &target.sentinel_master {
            let lookup = SentinelLookup::new(seeds()?, master, target.sentinel_password.as_deref(), certs)?;
            return Ok(Connector::Sentinel(lookup));
        }
        if target.cluster {
            let seeds = seeds()?;
            let mut builder = ClusterClientBuilder::new(seeds)
                .connection_timeout(timeout)
                .response_timeout(timeout)
                // Hookgate bounds every call itself and falls back to Postgres;
                // the crate's own retries only follow redirections.
                .retries(2);
            if let Some(certs) = certs {
                builder = builder.certs(certs);
            }
            return Ok(Connector::Cluster(builder.build()?));
        }
        let client = match certs {
            Some(certs) => Client::build_with_tls(target.url.as_str(), certs)?,
            None => Client::open(target.url.as_str())?,
        };
        Ok(Connector::Single(client))
    }

    /// A connection, and under Sentinel the master's address it reaches.
    pub(super) async fn connect(&self, timeout: Duration) -> RedisResult<(Conn, Option<(String, u16)>)> {
        match self {
            Connector::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1);
                Ok((Conn::Single(client.get_connection_manager_with_config(config).await?), None))
            }
            Connector::Sentinel(lookup) => {
                let (conn, master) = lookup.connect(timeout).await?;
                Ok((Conn::Sentinel(conn), Some(master)))
            }
            Connector::Cluster(client) => Ok((Conn::Cluster(client.get_async_connection().await?), None)),
        }
    }

    /// Under Sentinel: whether the Sentinels name another master than `current`.
    pub(super) async fn master_moved(&self, current: &(String, u16), timeout: Duration) -> bool {
        match self {
            Connector::Sentinel(lookup) => lookup.moved_from(current, timeout).await,
            _ => false,
        }
    }
}

/// The system's roots and the file's, in PEM, as the redis crate takes them (a
/// root given to it replaces the system's, so both are handed over).
fn tls_roots(path: &str) -> RedisResult<TlsCertificates> {
    let extra = std::fs::read(path).map_err(|e| {
        redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "HOOKGATE_REDIS_CA_FILE",
            format!("{path}: {e}"),
        ))
    })?;
    let mut pem = Vec::new();
    for cert in rustls_native_certs::load_native_certs().certs {
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        for line in STANDARD.encode(cert.as_ref()).as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    pem.extend_from_slice(&extra);
    Ok(TlsCertificates { client_tls: None, root_cert: Some(pem) })
}

/// A connection to either kind of Redis; commands and pipelines run on both.
/// Cheap to clone: both kinds multiplex one connection per node.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    /// Not a manager: it would reconnect to the old master after a failover. A
    /// failed call drops it instead, and the next connect asks the Sentinels.
    Sentinel(redis::aio::MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Conn {
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Whether a failed call should drop this connection and connect anew.
    pub(super) fn reconnects_itself(&self) -> bool {
        !matches!(self, Conn::Sentinel(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
