//! The `redis` broker source: a stream read by a consumer group; an entry is
//! acknowledged (`XACK`) only after the message it makes is committed, and the
//! entries a dead process left pending are claimed (`XAUTOCLAIM`) once idle.

use std::time::{Duration, Instant};

use redis::{aio::MultiplexedConnection, ConnectionAddr, IntoConnectionInfo, Value as Rv};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    brokers::{Reach, Received, Token},
    kind::{as_value, check_host, invalid, keep_password, without_password, Invalid},
    Dial,
};
use crate::ssrf::Guard;

/// `redis`: a stream read by a consumer group.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisSource {
    /// `redis://[user:password@]host[:port][/db]`.
    pub url: String,
    pub stream: String,
    /// The consumer group, made (at the stream's start) if it does not exist.
    #[serde(default = "group")]
    pub group: String,
}

fn group() -> String {
    "hookgate".into()
}

/// How long an entry read by another consumer stays pending before it is
/// claimed: that consumer is taken to be gone.
const CLAIM_IDLE_MS: u64 = 15_000;
/// How long one Redis command may take to answer, a blocking read's wait included.
const RESPONSE_BOUND: Duration = Duration::from_secs(15);
/// How often pending entries of gone consumers are looked for.
const CLAIM_EVERY: Duration = Duration::from_secs(5);

fn parse(raw: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("`url` is not a URL: {e}"))?;
    if url.scheme() != "redis" {
        return Err("`url` must start with redis:// (TLS, rediss://, is not supported for sources yet)".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("`url` names no host".into());
    }
    Ok(url)
}

impl RedisSource {
    pub fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        let url = parse(&self.url).map_err(invalid)?;
        check_host(guard, url.host_str().unwrap_or_default(), "url")?;
        if self.stream.is_empty() || self.stream.len() > 1024 {
            return Err(invalid("`stream` must be 1 to 1024 bytes"));
        }
        if self.group.is_empty() || self.group.len() > 255 {
            return Err(invalid("`group` must be 1 to 255 bytes"));
        }
        Ok(())
    }

    pub fn shown(&self) -> Value {
        as_value(&RedisSource { url: without_password(&self.url, true), ..self.clone() })
    }

    pub fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.url = keep_password(&self.url, &stored.url, "url")?;
        Ok(())
    }

    pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        parse(&self.url)
            .map(|u| vec![("url", u.host_str().unwrap_or_default().to_owned(), u.port().unwrap_or(6379))])
            .unwrap_or_default()
    }
}

/// A consumer of the group, on a connection of its own.
pub struct RedisConsumer {
    conn: MultiplexedConnection,
    stream: String,
    group: String,
    name: String,
    /// Read this consumer's own pending entries (from 0) before new ones: after
    /// connecting, and after giving entries back.
    own_first: bool,
    claimed_at: Option<Instant>,
}

impl RedisConsumer {
    pub(crate) async fn connect(cfg: &RedisSource, dial: &Dial<'_>, _: &Reach<'_>, tag: &str) -> Result<Self, String> {
        let url = parse(&cfg.url)?;
        let (host, port) = (url.host_str().unwrap_or_default().to_owned(), url.port().unwrap_or(6379));
        let addrs = dial.resolve(&host, port).await.map_err(|f| f.text)?;
        // The address just checked is the one dialled, and only it.
        let info = cfg
            .url
            .as_str()
            .into_connection_info()
            .map_err(|e| format!("`url`: {e}"))?
            .set_addr(ConnectionAddr::Tcp(addrs[0].ip().to_string(), addrs[0].port()));
        let client = redis::Client::open(info).map_err(|e| format!("Redis: {e}"))?;
        // Longer than a blocking read's wait (the client's default, half a second, is shorter).
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(RESPONSE_BOUND))
            .set_connection_timeout(Some(Duration::from_secs(10)));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("connecting to Redis failed: {e}"))?;
        let made: redis::RedisResult<Rv> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&cfg.stream)
            .arg(&cfg.group)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        if let Err(e) = made {
            if e.code() != Some("BUSYGROUP") {
                return Err(format!("making the consumer group failed: {e}"));
            }
        }
        Ok(RedisConsumer {
            conn,
            stream: cfg.stream.clone(),
            group: cfg.group.clone(),
            name: tag.to_owned(),
            own_first: true,
            claimed_at: None,
        })
    }

    pub async fn receive(&mut self, max: usize, wait: Duration) -> Result<Vec<Received>, String> {
        let err = |e: redis::RedisError| format!("Redis: {e}");
        if self.claimed_at.is_none_or(|t| t.elapsed() >= CLAIM_EVERY) {
            self.claimed_at = Some(Instant::now());
            let got: Rv = redis::cmd("XAUTOCLAIM")
                .arg(&self.stream)
                .arg(&self.group)
                .arg(&self.name)
                .arg(CLAIM_IDLE_MS)
                .arg("0-0")
                .arg("COUNT")
                .arg(max)
                .query_async(&mut self.conn)
                .await
                .map_err(err)?;
            let claimed = match &got {
                Rv::Array(parts) if parts.len() >= 2 => entries(&self.stream, &parts[1]),
                _ => Vec::new(),
            };
            if !claimed.is_empty() {
                return Ok(claimed);
            }
        }
        let own = std::mem::take(&mut self.own_first);
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg(&self.group).arg(&self.name).arg("COUNT").arg(max);
        if !own {
            read.arg("BLOCK").arg(wait.as_millis() as u64);
        }
        read.arg("STREAMS").arg(&self.stream).arg(if own { "0" } else { ">" });
        let got: Rv = read.query_async(&mut self.conn).await.map_err(err)?;
        // [[stream, [entries]]], or nil when the block ran out.
        let found = match &got {
            Rv::Array(streams) => streams
                .iter()
                .filter_map(|s| match s {
                    Rv::Array(pair) if pair.len() == 2 => Some(entries(&self.stream, &pair[1])),
                    _ => None,
                })
                .flatten()
                .collect(),
            _ => Vec::new(),
        };
        Ok(found)
    }

    pub async fn ack(&mut self, token: &Token) -> Result<(), String> {
        let Token::Redis(id) = token else { return Err("not a Redis stream entry".into()) };
        redis::cmd("XACK")
            .arg(&self.stream)
            .arg(&self.group)
            .arg(id)
            .query_async::<i64>(&mut self.conn)
            .await
            .map(|_| ())
            .map_err(|e| format!("Redis XACK: {e}"))
    }

    /// Holds an entry pending (nothing to do: it stays this consumer's).
    pub async fn keep(&mut self, _: &Token) -> Result<(), String> {
        Ok(())
    }

    /// Left pending: read again (from 0) at the next turn.
    pub async fn release(&mut self, _: &Token) -> Result<(), String> {
        self.own_first = true;
        Ok(())
    }
}

fn text(v: &Rv) -> Option<Vec<u8>> {
    match v {
        Rv::BulkString(b) => Some(b.clone()),
        Rv::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Rv::Int(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}

/// A stream's entries `[[id, [field, value, …]], …]` (a deleted one is nil:
/// skipped). The broker's id of each names the stream: entry ids repeat across
/// streams, and a source may be pointed at another.
fn entries(stream: &str, v: &Rv) -> Vec<Received> {
    let Rv::Array(items) = v else { return Vec::new() };
    items
        .iter()
        .filter_map(|e| {
            let Rv::Array(pair) = e else { return None };
            let [id, Rv::Array(fields), ..] = pair.as_slice() else { return None };
            let id = String::from_utf8(text(id)?).ok()?;
            let mut body = Vec::new();
            let mut headers = Vec::new();
            for kv in fields.chunks(2) {
                let [k, v] = kv else { continue };
                let (Some(k), Some(v)) = (text(k), text(v)) else { continue };
                let name = String::from_utf8_lossy(&k).to_ascii_lowercase();
                match name.as_str() {
                    "payload" | "body" => body = v,
                    _ => headers.push((name, String::from_utf8_lossy(&v).into_owned())),
                }
            }
            headers.sort();
            Some(Received { broker_id: Some(format!("{stream}/{id}")), body, headers, token: Token::Redis(id) })
        })
        .collect()
}
