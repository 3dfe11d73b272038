//! Finding the master through Redis Sentinel: every Sentinel is asked at once,
//! each within the timeout, and the first answer wins, so one unreachable
//! Sentinel costs nothing while another answers.
//!
//! The redis crate's own Sentinel client asks its Sentinels one after the other,
//! in list order, with its own default timeouts; a first Sentinel that drops
//! packets would hold every connect past Hookgate's bound. The lookup itself is
//! one command (`SENTINEL get-master-addr-by-name`) on the crate's connections.

use std::time::Duration;

use futures_util::future::select_ok;
use redis::{
    aio::MultiplexedConnection, AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, RedisConnectionInfo,
    RedisError, RedisResult, TlsCertificates,
};

/// The Sentinels, and how to reach the master they name.
pub(super) struct SentinelLookup {
    sentinels: Vec<Client>,
    master: String,
    /// The first URL: the master's user, password, database and TLS mode.
    master_template: ConnectionInfo,
    certs: Option<TlsCertificates>,
}

fn invalid(detail: String) -> RedisError {
    RedisError::from((redis::ErrorKind::InvalidClientConfig, "Redis Sentinel", detail))
}

impl SentinelLookup {
    pub(super) fn new(
        seeds: Vec<ConnectionInfo>,
        master: &str,
        sentinel_password: Option<&str>,
        certs: Option<TlsCertificates>,
    ) -> RedisResult<Self> {
        let first = seeds.first().cloned().ok_or_else(|| invalid("REDIS_URL names no Sentinel".into()))?;
        let mut sentinels = Vec::new();
        for seed in seeds {
            // A Sentinel is asked with its own password (or none), never the master's.
            let mut settings = RedisConnectionInfo::default();
            if let Some(p) = sentinel_password {
                settings = settings.set_password(p);
            }
            let info = seed.set_redis_settings(settings);
            sentinels.push(match &certs {
                Some(c) => Client::build_with_tls(info, c.clone())?,
                None => Client::open(info)?,
            });
        }
        Ok(Self { sentinels, master: master.to_owned(), master_template: first, certs })
    }

    /// Where the master is, by the first Sentinel to answer within `timeout`.
    async fn master_addr(&self, timeout: Duration) -> RedisResult<(String, u16)> {
        let asks = self.sentinels.iter().map(|client| {
            Box::pin(async move {
                let ask = async {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout));
                    let mut conn = client.get_multiplexed_async_connection_with_config(&config).await?;
                    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(&self.master)
                        .query_async(&mut conn)
                        .await?;
                    addr.ok_or_else(|| invalid(format!("the Sentinel knows no master named `{}`", self.master)))
                };
                match tokio::time::timeout(timeout, ask).await {
                    Ok(r) => r,
                    Err(_) => Err(RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))),
                }
            })
        });
        select_ok(asks).await.map(|(addr, _)| addr)
    }

    /// A connection to the master the Sentinels name now, checked to be a master
    /// (a Sentinel's view may lag a failover), and the master's address.
    pub(super) async fn connect(&self, timeout: Duration) -> RedisResult<(MultiplexedConnection, (String, u16))> {
        let (host, port) = self.master_addr(timeout).await?;
        let addr = match self.master_template.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => {
                ConnectionAddr::TcpTls { host: host.clone(), port, insecure: *insecure, tls_params: None }
            }
            _ => ConnectionAddr::Tcp(host.clone(), port),
        };
        let info = self.master_template.clone().set_addr(addr);
        let client = match &self.certs {
            Some(c) => Client::build_with_tls(info, c.clone())?,
            None => Client::open(info)?,
        };
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        let mut conn = client.get_multiplexed_async_connection_with_config(&config).await?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
        match role.first() {
            Some(redis::Value::BulkString(r)) if r == b"master" => Ok((conn, (host, port))),
            Some(redis::Value::SimpleString(r)) if r == "master" => Ok((conn, (host, port))),
            _ => Err(invalid(format!("{host}:{port}, named master by the Sentinel, is not a master (yet)"))),
        }
    }

    /// Whether the Sentinels now name another master than `current` (a failover
    /// that no failed call has shown yet); an unanswered question is no.
    pub(super) async fn moved_from(&self, current: &(String, u16), timeout: Duration) -> bool {
        matches!(self.master_addr(timeout).await, Ok(addr) if addr != *current)
    }
}
