//! The `rabbitMq` destination: each message published to the default exchange
//! with the destination's routing key, persistent, and counted delivered only
//! once the broker confirms it (publisher confirms).

use std::{collections::HashMap, sync::Arc};

use lapin::{
    options::{BasicPublishOptions, ConfirmSelectOptions},
    types::{AMQPValue, FieldTable, LongString, ShortString},
    uri::{AMQPScheme, AMQPUri},
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties,
};
use tokio::sync::Mutex;

use super::{config::RabbitMq, Failure, Key, Outbound};
use crate::{deliver::send::Outcome, ssrf::Guard};

/// Parses an `amqp://` or `amqps://` URI.
pub(super) fn parse_uri(raw: &str) -> Result<AMQPUri, String> {
    let uri: AMQPUri = raw.parse().map_err(|e| format!("`uri` is not a valid AMQP URI: {e}"))?;
    if uri.authority.host.is_empty() {
        return Err("`uri` names no host".into());
    }
    Ok(uri)
}

/// One open connection and its confirming channel, for one destination as
/// configured when it opened (`fingerprint`).
struct Link {
    fingerprint: Vec<u8>,
    // Kept open for the channel's sake.
    _conn: Connection,
    channel: Channel,
}

/// Connections kept per destination: opened on first use, shared by its
/// concurrent publishes, dropped on any error or change of configuration.
#[derive(Default)]
pub(super) struct Links {
    open: std::sync::Mutex<HashMap<Key, Arc<Mutex<Option<Link>>>>>,
}

/// Destinations whose connections are kept; past it the map starts over.
const MOST_LINKS: usize = 1024;

impl Links {
    fn slot(&self, key: &Key) -> Arc<Mutex<Option<Link>>> {
        let mut open = self.open.lock().expect("the links lock is never poisoned");
        if open.len() >= MOST_LINKS && !open.contains_key(key) {
            open.clear();
        }
        open.entry(key.clone()).or_default().clone()
    }

    /// Publishes one message and waits for the broker's confirm.
    pub(super) async fn publish(
        &self,
        key: &Key,
        fingerprint: &[u8],
        cfg: &RabbitMq,
        guard: &Guard,
        out: &Outbound<'_>,
    ) -> Result<String, Failure> {
        let slot = self.slot(key);
        // Held only while connecting: publishes share the channel once it is open.
        let channel = {
            let mut link = slot.lock().await;
            match link.as_ref().filter(|l| l.fingerprint == fingerprint && l.channel.status().connected()) {
                Some(l) => l.channel.clone(),
                None => {
                    *link = None;
                    let made = connect(cfg, guard).await?;
                    let channel = made.channel.clone();
                    *link = Some(Link { fingerprint: fingerprint.to_vec(), ..made });
                    channel
                }
            }
        };
        let answer = send(&channel, cfg, out).await;
        if answer.as_ref().is_err_and(|f| f.outcome != Outcome::Refused) {
            // A broken link is made again by the next attempt.
            *slot.lock().await = None;
        }
        answer
    }
}

async fn connect(cfg: &RabbitMq, guard: &Guard) -> Result<Link, Failure> {
    let mut uri = parse_uri(&cfg.uri).map_err(Failure::refused)?;
    let addrs = super::resolve(guard, &uri.authority.host, uri.authority.port).await?;
    // Without TLS the address just checked is the one dialled (a name resolved
    // twice could answer differently); with TLS the name stays, for the certificate.
    if uri.scheme == AMQPScheme::AMQP {
        uri.authority.host = addrs[0].ip().to_string();
    }
    let conn = Connection::connect_uri(uri, ConnectionProperties::default())
        .await
        .map_err(|e| Failure::connect(format!("connecting to RabbitMQ failed: {e}")))?;
    let channel =
        conn.create_channel().await.map_err(|e| Failure::connect(format!("opening a RabbitMQ channel failed: {e}")))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| Failure::connect(format!("RabbitMQ refused publisher confirms: {e}")))?;
    Ok(Link { fingerprint: Vec::new(), _conn: conn, channel })
}

async fn send(channel: &Channel, cfg: &RabbitMq, out: &Outbound<'_>) -> Result<String, Failure> {
    let mut headers = FieldTable::default();
    for (name, value) in out.headers {
        headers.insert(short(name), AMQPValue::LongString(LongString::from(value.as_bytes())));
    }
    let props = BasicProperties::default()
        .with_message_id(short(out.msg_id))
        .with_content_type(short(out.content_type))
        .with_type(short(out.event_type))
        .with_delivery_mode(2)
        .with_timestamp(out.timestamp as u64)
        .with_headers(headers);
    let options = BasicPublishOptions { mandatory: cfg.mandatory, ..Default::default() };
    let confirm = channel
        .basic_publish(ShortString::from(""), short(&cfg.routing_key), options, out.payload, props)
        .await
        .map_err(|e| Failure::connect(format!("publishing to RabbitMQ failed: {e}")))?;
    match confirm.await.map_err(|e| Failure::connect(format!("RabbitMQ's confirm did not come: {e}")))? {
        Confirmation::Ack(None) => Ok("confirmed by RabbitMQ".into()),
        Confirmation::Ack(Some(r)) | Confirmation::Nack(Some(r)) => Err(Failure::refused(format!(
            "returned by RabbitMQ: {} {} (no queue takes routing key `{}`)",
            r.reply_code, r.reply_text, cfg.routing_key
        ))),
        Confirmation::Nack(None) => Err(Failure::refused("RabbitMQ did not take the message (nack)")),
        Confirmation::NotRequested => Err(Failure::connect("RabbitMQ's channel is not confirming")),
    }
}

/// An AMQP short string (at most 255 bytes): longer text is cut at a character boundary.
fn short(s: &str) -> ShortString {
    let mut end = s.len().min(255);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    ShortString::try_new(&s[..end]).expect("at most 255 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_string_is_cut_at_255_bytes_on_a_character_boundary() {
        let long = "é".repeat(200);
        let s = short(&long);
        assert!(s.as_str().len() <= 255 && s.as_str().chars().all(|c| c == 'é'));
        assert_eq!(short("orders").as_str(), "orders");
    }
}
