//! The `rabbitMq` broker source: a queue consumed with manual acknowledgements
//! (a message is acknowledged only after the message it makes is committed),
//! at most `prefetch` unacknowledged at once, over a connection dialled only to
//! an address the tenant's SSRF guard allows.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::{
    options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions},
    types::{AMQPValue, FieldTable},
    Channel, Connection,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    brokers::{Reach, Received, Token},
    kind::{as_value, check_host, invalid, keep_password, without_password, Invalid},
    rabbitmq::{open, parse_uri, Socket},
    Dial,
};
use crate::ssrf::Guard;

/// `rabbitMq`: a queue, read with acknowledgements.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RabbitMqSource {
    /// `amqp://user:pass@host:port/vhost` (the vhost percent-escaped: `%2F` for `/`).
    pub uri: String,
    /// The queue to consume; it must exist.
    pub queue: String,
    /// Messages handed over unacknowledged at once, 1 to 100 (20): each is held
    /// in memory until it is acknowledged.
    #[serde(default = "prefetch")]
    pub prefetch: u16,
}

fn prefetch() -> u16 {
    20
}

impl RabbitMqSource {
    pub fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        let uri = parse_uri(&self.uri).map_err(invalid)?;
        check_host(guard, &uri.authority.host, "uri")?;
        if self.queue.is_empty() || self.queue.len() > 255 || self.queue.contains('\0') {
            return Err(invalid("`queue` must be 1 to 255 bytes, without NUL"));
        }
        if !(1..=100).contains(&self.prefetch) {
            return Err(invalid("`prefetch` must be 1 to 100"));
        }
        Ok(())
    }

    pub fn shown(&self) -> Value {
        as_value(&RabbitMqSource { uri: without_password(&self.uri, true), ..self.clone() })
    }

    pub fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.uri = keep_password(&self.uri, &stored.uri, "uri")?;
        Ok(())
    }

    pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        parse_uri(&self.uri).map(|u| vec![("uri", u.authority.host, u.authority.port)]).unwrap_or_default()
    }
}

/// A consuming channel on a connection of its own.
pub struct RabbitConsumer {
    _conn: Connection,
    channel: Channel,
    consumer: lapin::Consumer,
    socket: Socket,
}

impl Drop for RabbitConsumer {
    fn drop(&mut self) {
        // lapin's connection thread ends with its socket; unacknowledged messages
        // go back to the queue when the broker sees the connection close.
        self.socket.shut();
    }
}

impl RabbitConsumer {
    pub(crate) async fn connect(
        cfg: &RabbitMqSource,
        dial: &Dial<'_>,
        _: &Reach<'_>,
        tag: &str,
    ) -> Result<Self, String> {
        let (conn, socket, _) = open(&cfg.uri, dial).await.map_err(|f| f.text)?;
        let shut = |e: String| {
            socket.shut();
            e
        };
        let channel =
            conn.create_channel().await.map_err(|e| shut(format!("opening a RabbitMQ channel failed: {e}")))?;
        channel
            .basic_qos(cfg.prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| shut(format!("RabbitMQ refused the prefetch: {e}")))?;
        let consumer = channel
            .basic_consume(
                cfg.queue.as_str().into(),
                tag.into(),
                BasicConsumeOptions { no_ack: false, ..Default::default() },
                FieldTable::default(),
            )
            .await
            .map_err(|e| shut(format!("consuming queue `{}` failed: {e}", cfg.queue)))?;
        Ok(RabbitConsumer { _conn: conn, channel, consumer, socket })
    }

    /// Up to `max` messages: waits at most `wait` for the first, then takes what
    /// has arrived.
    pub async fn receive(&mut self, max: usize, wait: Duration) -> Result<Vec<Received>, String> {
        let mut out = Vec::new();
        let first = match tokio::time::timeout(wait, self.consumer.next()).await {
            Err(_) => return Ok(out),
            Ok(None) => return Err("RabbitMQ ended the consumer".into()),
            Ok(Some(d)) => d.map_err(|e| format!("RabbitMQ: {e}"))?,
        };
        out.push(received(first));
        while out.len() < max {
            match tokio::time::timeout(Duration::from_millis(5), self.consumer.next()).await {
                Ok(Some(Ok(d))) => out.push(received(d)),
                Ok(Some(Err(e))) => return Err(format!("RabbitMQ: {e}")),
                _ => break,
            }
        }
        Ok(out)
    }

    pub async fn ack(&mut self, token: &Token) -> Result<(), String> {
        let Token::Rabbit(tag) = *token else { return Err("not a RabbitMQ message".into()) };
        self.channel.basic_ack(tag, BasicAckOptions::default()).await.map_err(|e| format!("RabbitMQ ack: {e}"))
    }

    /// Holds a message unacknowledged: the broker keeps it while the channel is
    /// open (one it closed, past its consumer timeout, has given it back).
    pub async fn keep(&mut self, _: &Token) -> Result<(), String> {
        match self.channel.status().connected() {
            true => Ok(()),
            false => Err("RabbitMQ closed the channel; what it held went back to the queue".into()),
        }
    }

    /// Gives a message back to the queue, for later.
    pub async fn release(&mut self, token: &Token) -> Result<(), String> {
        let Token::Rabbit(tag) = *token else { return Err("not a RabbitMQ message".into()) };
        let options = BasicNackOptions { requeue: true, multiple: false };
        self.channel.basic_nack(tag, options).await.map_err(|e| format!("RabbitMQ nack: {e}"))
    }
}

fn received(d: lapin::message::Delivery) -> Received {
    let p = &d.properties;
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(t) = p.kind() {
        headers.push(("type".into(), t.to_string()));
    }
    if let Some(table) = p.headers() {
        for (k, v) in table.inner() {
            let text = match v {
                AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                AMQPValue::ShortString(s) => s.to_string(),
                AMQPValue::Boolean(b) => b.to_string(),
                AMQPValue::LongLongInt(n) => n.to_string(),
                AMQPValue::LongInt(n) => n.to_string(),
                AMQPValue::ShortInt(n) => n.to_string(),
                _ => continue,
            };
            headers.push((k.to_string().to_ascii_lowercase(), text));
        }
    }
    headers.sort();
    Received {
        broker_id: p.message_id().as_ref().map(|m| m.to_string()),
        body: d.data,
        headers,
        token: Token::Rabbit(d.delivery_tag),
    }
}
