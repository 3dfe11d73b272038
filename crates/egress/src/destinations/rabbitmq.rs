//! The `rabbitMq` destination: each message published to the default exchange
//! with the destination's routing key, persistent, and counted delivered only
//! once the broker confirms it (publisher confirms).

use std::sync::Arc;

use lapin::{
    options::{BasicPublishOptions, ConfirmSelectOptions},
    tcp::{AsyncTcpStream, TLSConfig},
    types::{AMQPValue, FieldTable, LongString, ShortString},
    uri::{AMQPScheme, AMQPUri},
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties,
};

use hookgate_shared::status::EndpointKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    kind::{as_value, check_host, invalid, keep_password, without_password, Invalid, Kind},
    Dial, Failure, HandOver, Kept, Key, Outbound,
};
use crate::{deliver::send::Outcome, ssrf::Guard};

/// `rabbitMq`: publish to RabbitMQ's default exchange with a routing key (a
/// queue's name, or a binding of the default exchange), with publisher confirms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RabbitMq {
    /// `amqp://user:pass@host:port/vhost` (the vhost percent-escaped: `%2F` for `/`).
    pub uri: String,
    pub routing_key: String,
    /// Refused by the broker when no queue takes it (a failed attempt), rather
    /// than dropped: Svix's default.
    #[serde(default = "yes")]
    pub mandatory: bool,
}

fn yes() -> bool {
    true
}

impl Kind for RabbitMq {
    const KIND: EndpointKind = EndpointKind::RabbitMq;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        let uri = parse_uri(&self.uri).map_err(invalid)?;
        check_host(guard, &uri.authority.host, "uri")?;
        if self.routing_key.len() > 255 || self.routing_key.contains('\0') {
            return Err(invalid("`routingKey` must be at most 255 bytes, without NUL"));
        }
        Ok(())
    }

    fn locator(&self) -> String {
        format!("{}#{}", without_password(&self.uri, false), self.routing_key)
    }

    fn shown(&self, _names_only: bool) -> Value {
        as_value(&RabbitMq { uri: without_password(&self.uri, true), ..self.clone() })
    }

    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.uri = keep_password(&self.uri, &stored.uri, "uri")?;
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        parse_uri(&self.uri).map(|u| vec![("uri", u.authority.host, u.authority.port)]).unwrap_or_default()
    }

    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
        at.links.rabbitmq.publish(at.key, at.fingerprint, self, &at.dial, out).await
    }
}

/// Parses an `amqp://` or `amqps://` URI.
pub(super) fn parse_uri(raw: &str) -> Result<AMQPUri, String> {
    // The AMQP parser reads an IPv6 literal's host as `localhost` (it asks for a
    // domain): such a URI would reach this host, not the one written.
    match url::Url::parse(raw).map(|u| u.host().map(|h| matches!(h, url::Host::Ipv6(_)))) {
        Ok(Some(false)) => {}
        Ok(Some(true)) => return Err("`uri` may not name an IPv6 address literal: give a name".into()),
        _ => return Err("`uri` names no host".into()),
    }
    let uri: AMQPUri = raw.parse().map_err(|e| format!("`uri` is not a valid AMQP URI: {e}"))?;
    if uri.authority.host.is_empty() {
        return Err("`uri` names no host".into());
    }
    // AMQP short strings: longer would fail inside the client, at every attempt.
    if uri.vhost.len() > 255 || uri.authority.userinfo.username.len() > 255 {
        return Err("`uri`: the vhost and the user name are at most 255 bytes".into());
    }
    Ok(uri)
}

/// Confirming channels per connection, each with at most one publish awaiting
/// its confirm: a destination's concurrent publishes go side by side up to this.
const LANES: usize = 8;

/// One open connection and its confirming channels, for one destination as
/// configured when it opened (`fingerprint`).
pub(super) struct Link {
    fingerprint: Vec<u8>,
    /// The address dialled: whether the broker's answers come from a private network.
    addr: std::net::SocketAddr,
    conn: Arc<Connection>,
    lanes: Arc<[tokio::sync::Mutex<Lane>; LANES]>,
    socket: Socket,
}

/// A channel in confirm mode that has at most one publish in flight.
///
/// Why one: the broker answers an unroutable `mandatory` message with a
/// `basic.return` and then an ack, and may ack several messages at once
/// (`multiple`). lapin hands a return to whichever confirm completes next, not
/// to the message it returns, so with several in flight a returned message
/// could be recorded as confirmed (and a delivered one as returned). With one
/// in flight, a return and an ack can only be that message's.
#[derive(Default)]
struct Lane {
    channel: Option<Channel>,
    /// A publish began and its confirm was never read (its attempt was
    /// abandoned): the channel may still get that message's return, so it is
    /// not used again.
    dirty: bool,
}

/// Connections kept per destination: opened on first use, shared by its
/// concurrent publishes, dropped on any error or change of configuration.
pub(super) type Links = Kept<Link, 1024>;

impl Links {
    /// Publishes one message and waits for the broker's confirm.
    pub(super) async fn publish(
        &self,
        key: &Key,
        fingerprint: &[u8],
        cfg: &RabbitMq,
        dial: &Dial<'_>,
        out: &Outbound<'_>,
    ) -> Result<String, Failure> {
        let slot = self.slot(key);
        // Held only while connecting: publishes share the connection once it is open.
        let (conn, lanes) = {
            let mut link = slot.lock().await;
            match link.as_ref().filter(|l| l.fingerprint == fingerprint && l.conn.status().connected()) {
                Some(l) => {
                    dial.reached.dialled(l.addr);
                    (l.conn.clone(), l.lanes.clone())
                }
                None => {
                    *link = None;
                    let mut made = connect(cfg, dial).await?;
                    made.fingerprint = fingerprint.to_vec();
                    let taken = (made.conn.clone(), made.lanes.clone());
                    *link = Some(made);
                    taken
                }
            }
        };
        let answer = on_a_lane(&conn, &lanes, cfg, out).await;
        if answer.as_ref().is_err_and(|f| f.outcome != Outcome::Refused) {
            // A broken link is made again by the next attempt; only this one: the
            // slot may hold a newer link by now (made after a change of
            // configuration, or after another publish's failure), which others use.
            let mut link = slot.lock().await;
            if link.as_ref().is_some_and(|l| Arc::ptr_eq(&l.conn, &conn)) {
                *link = None;
            }
        }
        answer
    }
}

/// Publishes on a free lane (or waits for one), opening its channel if it has none.
async fn on_a_lane(
    conn: &Connection,
    lanes: &[tokio::sync::Mutex<Lane>; LANES],
    cfg: &RabbitMq,
    out: &Outbound<'_>,
) -> Result<String, Failure> {
    // A free lane if there is one; else wait for the one the message id picks,
    // so that waiters spread over the lanes.
    let mut lane = match lanes.iter().find_map(|l| l.try_lock().ok()) {
        Some(free) => free,
        None => lanes[out.msg_id.bytes().map(usize::from).sum::<usize>() % LANES].lock().await,
    };
    let usable = lane.channel.as_ref().is_some_and(|c| c.status().connected()) && !lane.dirty;
    if !usable {
        if let Some(old) = lane.channel.take() {
            // Closed, not merely dropped: a channel left open counts against the broker's limit.
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(5), old.close(200, short("replaced"))).await;
            });
        }
        lane.dirty = false;
        lane.channel = Some(confirming_channel(conn).await?);
    }
    let channel = lane.channel.clone().expect("just made");
    lane.dirty = true;
    let answer = send(&channel, cfg, out).await;
    // Read to the end (confirmed, returned, nacked or failed): nothing of it can reach another message.
    lane.dirty = false;
    answer
}

async fn confirming_channel(conn: &Connection) -> Result<Channel, Failure> {
    let channel =
        conn.create_channel().await.map_err(|e| Failure::connect(format!("opening a RabbitMQ channel failed: {e}")))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| Failure::connect(format!("RabbitMQ refused publisher confirms: {e}")))?;
    Ok(channel)
}

/// The socket under a link, kept apart so it can be shut: lapin runs each
/// connection on a thread of its own that ends only when its socket does. Shut
/// when a connect is abandoned (its handshake may never be answered) and when a
/// link is dropped, so no thread outlives what it served.
#[derive(Clone, Default)]
pub(super) struct Socket(Arc<std::sync::Mutex<Option<std::os::fd::OwnedFd>>>);

impl Socket {
    fn new() -> Self {
        Socket::default()
    }

    /// Keeps a duplicate of lapin's descriptor: shutting it shuts the connection.
    /// The duplicate is close-on-exec (`F_DUPFD_CLOEXEC`), so a child process
    /// (the transformation sandbox) never inherits a tenant's broker connection.
    fn keep(&self, fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
        let dup = fd.try_clone_to_owned()?;
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(dup);
        Ok(())
    }

    pub(super) fn shut(&self) {
        if let Some(fd) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // Shuts the connection for lapin's descriptor too; the duplicate is closed when dropped.
            let _ = socket2::SockRef::from(&fd).shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Shuts a socket when dropped, unless disarmed: an abandoned connect's.
struct ShutUnlessKept(Option<Socket>);

impl Drop for ShutUnlessKept {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.shut();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.socket.shut();
    }
}

async fn connect(cfg: &RabbitMq, dial: &Dial<'_>) -> Result<Link, Failure> {
    let (conn, socket, addr) = open(&cfg.uri, dial).await?;
    // The first lane's channel now, so a broker that refuses channels or confirms fails the connect.
    let lanes: Arc<[tokio::sync::Mutex<Lane>; LANES]> = Arc::new(Default::default());
    let mut first = ShutUnlessKept(Some(socket.clone()));
    lanes[0].try_lock().expect("new").channel = Some(confirming_channel(&conn).await?);
    first.0 = None;
    Ok(Link { fingerprint: Vec::new(), addr, conn: Arc::new(conn), lanes, socket })
}

/// Opens a connection to the broker `raw` names, dialling only an address the
/// guard allows (the name kept for TLS's certificate check). The socket shuts
/// the connection when shut; it is shut already if this fails.
pub(super) async fn open(raw: &str, dial: &Dial<'_>) -> Result<(Connection, Socket, std::net::SocketAddr), Failure> {
    let uri = parse_uri(raw).map_err(Failure::refused)?;
    let addrs = dial.resolve(&uri.authority.host, uri.authority.port).await?;
    // The address just checked is the one dialled, and only it; the name stays
    // for TLS's certificate check.
    let addr = addrs[0];
    dial.reached.dialled(addr);
    let host = uri.authority.host.clone();
    let tls = uri.scheme == AMQPScheme::AMQPS;
    let socket = Socket::new();
    let mut guard_socket = ShutUnlessKept(Some(socket.clone()));
    let keep = socket.clone();
    let dial = async move |_: AMQPUri, rt| {
        let stream: AsyncTcpStream<async_compat::Compat<tokio::net::TcpStream>> =
            AsyncTcpStream::connect(&rt, addr).await?;
        if let AsyncTcpStream::Plain(c) = &stream {
            keep.keep(std::os::fd::AsFd::as_fd(c.get_ref()))?;
        }
        match tls {
            true => Ok(stream.into_tls(&host, TLSConfig::default()).await?),
            false => Ok(stream),
        }
    };
    let runtime = lapin::runtime::default_runtime().map_err(|e| Failure::connect(e.to_string()))?;
    let conn = Connection::connector(uri, runtime, dial, ConnectionProperties::default())
        .await
        .map_err(|e| Failure::connect(format!("connecting to RabbitMQ failed: {e}")))?;
    guard_socket.0 = None;
    Ok((conn, socket, addr))
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
    // Published: from here a broken connection leaves the message's fate unknown,
    // and the retry may repeat it (the consumer drops the copy by `message_id`).
    let confirmed = confirm.await.map_err(|e| Failure {
        outcome: Outcome::Unconfirmed,
        text: format!("RabbitMQ's confirm did not come; the message may have arrived: {e}"),
    })?;
    match confirmed {
        Confirmation::Ack(None) => Ok("confirmed by RabbitMQ".into()),
        // With one publish in flight per channel a return is this message's; one
        // that names another message means the channel cannot be trusted.
        Confirmation::Ack(Some(r)) | Confirmation::Nack(Some(r))
            if r.delivery.properties.message_id().as_ref().is_some_and(|id| id.as_str() != out.msg_id) =>
        {
            Err(Failure {
                outcome: Outcome::Unconfirmed,
                text: "RabbitMQ's answer was for another message; this one's fate is unknown".into(),
            })
        }
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

    #[test]
    fn the_kept_duplicate_of_a_broker_socket_is_closed_on_exec() {
        use std::os::fd::{AsFd, AsRawFd};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let socket = Socket::new();
        socket.keep(stream.as_fd()).unwrap();
        let kept = socket.0.lock().unwrap().as_ref().map(AsRawFd::as_raw_fd).expect("kept");
        assert_ne!(kept, stream.as_raw_fd(), "a duplicate, not the stream's own descriptor");
        // SAFETY: F_GETFD only reads the flags of a descriptor that is open (kept above).
        let flags = unsafe { libc::fcntl(kept, libc::F_GETFD) };
        assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0, "flags {flags:#x}: a child process would inherit it");
        socket.shut();
        assert!(socket.0.lock().unwrap().is_none(), "closed once shut");
    }
}
