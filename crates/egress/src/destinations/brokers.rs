//! Broker sources, the other way round from destinations: queues and streams
//! Hookgate reads messages from. One row per kind below names it; each kind
//! owns its configuration and its consumer in a file of its own
//! (`from_rabbitmq.rs`, `from_sqs.rs`, `from_redis.rs`), dialling only what the
//! tenant's SSRF guard allows, as destinations do.

use std::time::Duration;

use hookgate_shared::{
    ids::{BrokerSourceId, TenantId},
    store::broker_sources::purpose,
    AppState,
};
use serde_json::Value;

use super::{
    from_rabbitmq::{RabbitConsumer, RabbitMqSource},
    from_redis::{RedisConsumer, RedisSource},
    from_sqs::{SqsConsumer, SqsSource},
    kind::{invalid, Invalid},
    system_lookup, Dial, Reached,
};
use crate::{deliver::send::Sender, ssrf::Guard};

/// One broker message as read, with what acknowledges it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The broker's id of it, if it has one that stays the same on redelivery.
    pub broker_id: Option<String>,
    pub body: Vec<u8>,
    /// Headers, attributes or stream fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub token: Token,
}

/// What acknowledges one message on its broker.
#[derive(Debug, Clone)]
pub enum Token {
    Rabbit(u64),
    Sqs(String),
    Redis(String),
}

macro_rules! broker_kinds {
    ($($name:literal => $variant:ident($config:ty, $consumer:ty);)*) => {
        /// Every broker source kind by its API name.
        pub const KINDS: &[&str] = &[$($name),*];

        /// A broker source's configuration, by kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum BrokerConfig { $($variant($config)),* }

        /// A kind's open consumer.
        // One per consumed source: a few hundred bytes, not worth a box.
        #[allow(clippy::large_enum_variant)]
        pub enum Consumer { $($variant($consumer)),* }

        impl BrokerConfig {
            /// The configuration given for `kind`, checked (hosts against `guard`).
            pub fn parse(kind: &str, config: Value, guard: &Guard) -> Result<BrokerConfig, Invalid> {
                let parsed = match kind {
                    $($name => BrokerConfig::$variant(serde_json::from_value(config)
                        .map_err(|e| invalid(format!("`config`: {e}")))?),)*
                    other => return Err(invalid(format!(
                        "`type`: `{}` is not one of {}", other.chars().take(32).collect::<String>(), KINDS.join(", ")))),
                };
                parsed.check(guard)?;
                Ok(parsed)
            }

            pub fn kind(&self) -> &'static str {
                match self { $(BrokerConfig::$variant(_) => $name),* }
            }

            fn check(&self, guard: &Guard) -> Result<(), Invalid> {
                match self { $(BrokerConfig::$variant(c) => c.check(guard)),* }
            }

            /// As the API shows it: no password or secret key.
            pub fn shown(&self) -> Value {
                match self { $(BrokerConfig::$variant(c) => c.shown()),* }
            }

            /// Where it dials, for the check that it is not Hookgate's own server.
            pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
                match self { $(BrokerConfig::$variant(c) => c.dialled()),* }
            }

            /// A secret left out or redacted in `self` (it is never shown) is
            /// taken from `stored` where the rest says it is the same.
            pub fn keep_redacted(&mut self, stored: &BrokerConfig) -> Result<(), Invalid> {
                match (self, stored) {
                    $((BrokerConfig::$variant(new), BrokerConfig::$variant(old)) => new.keep_redacted(old),)*
                    #[allow(unreachable_patterns)]
                    _ => Ok(()),
                }
            }

            fn to_json(&self) -> Vec<u8> {
                match self { $(BrokerConfig::$variant(c) => serde_json::to_vec(c)),* }.expect("a configuration serialises")
            }

            fn from_json(kind: &str, bytes: &[u8]) -> Result<BrokerConfig, String> {
                match kind {
                    $($name => serde_json::from_slice(bytes).map(BrokerConfig::$variant).map_err(|e| e.to_string()),)*
                    other => Err(format!("unknown broker source kind `{other}`")),
                }
            }

            /// Connects and starts consuming, as consumer `tag`, within `bound`.
            pub async fn consume(&self, tag: &str, at: &Reach<'_>, bound: Duration) -> Result<Consumer, String> {
                let lookup = system_lookup();
                let reached = Reached::default();
                let dial = Dial { guard: at.guard, lookup: &lookup, reached: &reached };
                let work = async {
                    Ok(match self { $(BrokerConfig::$variant(c) => Consumer::$variant(<$consumer>::connect(c, &dial, at, tag).await?)),* })
                };
                tokio::time::timeout(bound, work).await.unwrap_or_else(|_| Err(format!("no connection within {} s", bound.as_secs())))
            }
        }

        impl Consumer {
            /// Up to `max` messages, waiting at most `wait` for the first.
            pub async fn receive(&mut self, max: usize, wait: Duration) -> Result<Vec<Received>, String> {
                match self { $(Consumer::$variant(c) => c.receive(max, wait).await),* }
            }

            /// Acknowledges a message: it is not delivered again.
            pub async fn ack(&mut self, token: &Token) -> Result<(), String> {
                match self { $(Consumer::$variant(c) => c.ack(token).await),* }
            }

            /// Holds a message read but not settled (an SQS message's visibility is
            /// renewed), so the broker gives it to no one else meanwhile.
            pub async fn keep(&mut self, token: &Token) -> Result<(), String> {
                match self { $(Consumer::$variant(c) => c.keep(token).await),* }
            }

            /// Gives a message back, to be read again later.
            pub async fn release(&mut self, token: &Token) -> Result<(), String> {
                match self { $(Consumer::$variant(c) => c.release(token).await),* }
            }
        }
    };
}

broker_kinds! {
    "rabbitMq" => RabbitMq(RabbitMqSource, RabbitConsumer);
    "sqs" => Sqs(SqsSource, SqsConsumer);
    "redis" => Redis(RedisSource, RedisConsumer);
}

/// What a consumer may reach: the tenant's guard, and its guarded HTTP client (SQS).
pub struct Reach<'a> {
    pub guard: &'a Guard,
    pub sender: &'a Sender,
}

impl BrokerConfig {
    /// Sealed with the tenant's key, bound to the source.
    pub fn seal(&self, state: &AppState, tenant: &TenantId, id: &BrokerSourceId) -> Vec<u8> {
        state.config.master_key.tenant_key(tenant).seal(&purpose(id), &self.to_json())
    }

    /// The stored configuration of a source of `kind`.
    pub fn open(
        state: &AppState,
        tenant: &TenantId,
        id: &BrokerSourceId,
        kind: &str,
        sealed: &[u8],
    ) -> Result<Self, String> {
        let plain = state.config.master_key.tenant_key(tenant).open(&purpose(id), sealed).map_err(|e| e.to_string())?;
        BrokerConfig::from_json(kind, &plain)
    }
}
