//! A `postgres` destination's connections, kept per destination, and the row
//! each message is written as.

use std::{net::SocketAddr, time::Duration};

use hookgate_shared::db::tls;
use tokio_postgres::{config::SslMode, tls::MakeTlsConnect, Client, Statement};

use tokio::sync::oneshot;

use super::{
    parse_url, table_name,
    wire::{CapTls, Capped},
    Postgres, Target,
};
use crate::destinations::{Dial, Failure, Kept, Key, Outbound};

/// The table a destination writes, made if missing. Documented in docs/destinations.md.
fn create_sql(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            id           text PRIMARY KEY,
            event_type   text NOT NULL,
            event_id     text,
            channels     text[],
            payload      jsonb,
            body         bytea,
            content_type text NOT NULL,
            created_at   timestamptz NOT NULL,
            delivered_at timestamptz NOT NULL DEFAULT now()
        )"
    )
}

fn insert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (id, event_type, event_id, channels, payload, body, content_type, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING"
    )
}

pub(crate) struct Link {
    fingerprint: Vec<u8>,
    /// The address dialled: whether the server's answers come from a private network.
    addr: SocketAddr,
    /// Why the connection ended, once it has (the client itself only says "closed").
    broke: Option<oneshot::Receiver<String>>,
    client: Client,
    /// Set once the table is there; a link is kept only with it.
    insert: Option<Statement>,
}

/// Connections kept per destination, as for RabbitMQ.
pub(crate) type Links = Kept<Link, 256>;

impl Links {
    /// Inserts one message's row.
    pub(crate) async fn publish(
        &self,
        key: &Key,
        fingerprint: &[u8],
        cfg: &Postgres,
        dial: &Dial<'_>,
        out: &Outbound<'_>,
    ) -> Result<String, Failure> {
        let slot = self.slot(key);
        // One connection per destination, its statements one at a time.
        let mut link = slot.lock().await;
        if link.as_ref().is_none_or(|l| l.fingerprint != fingerprint || l.client.is_closed()) {
            *link = None;
            *link = Some(connect(cfg, dial, fingerprint).await?);
        }
        let l = link.as_ref().expect("just made");
        dial.reached.dialled(l.addr);
        let insert = l.insert.clone().expect("a kept link has its statement");
        // jsonb takes no NUL (`\u0000`): such a payload goes as bytes, like any non-JSON one.
        let has_nul = out.payload.windows(6).any(|w| w == b"\\u0000");
        let json: Option<serde_json::Value> = (out.content_type.starts_with("application/json") && !has_nul)
            .then(|| serde_json::from_slice(out.payload).ok())
            .flatten();
        let body: Option<&[u8]> = if json.is_none() { Some(out.payload) } else { None };
        let inserted = l
            .client
            .execute(
                &insert,
                &[
                    &out.msg_id,
                    &out.event_type,
                    &out.event_id,
                    &out.channels,
                    &json,
                    &body,
                    &out.content_type,
                    &out.created_at,
                ],
            )
            .await;
        match inserted {
            Ok(1) => Ok("inserted".into()),
            Ok(_) => Ok("already there (a row with this message id; not inserted again)".into()),
            Err(e) => {
                // A broken connection, or one the server will not write through
                // (08: connection, 25: read-only transaction after a failover,
                // 57: shutting down): made again at the next attempt.
                let class = e.code().map(|c| c.code().get(..2).unwrap_or_default().to_owned());
                let closed = l.client.is_closed();
                let failure = match e.as_db_error() {
                    Some(db) => {
                        Failure::refused(format!("Postgres refused the row: {} ({})", db.message(), db.code().code()))
                    }
                    None => Failure::connect(format!("writing to Postgres failed: {}", reason(&e, &mut link).await)),
                };
                if closed || matches!(class.as_deref(), Some("08" | "25" | "57")) {
                    *link = None;
                }
                Err(failure)
            }
        }
    }
}

async fn connect(cfg: &Postgres, dial: &Dial<'_>, fingerprint: &[u8]) -> Result<Link, Failure> {
    let target = parse_url(&cfg.url).map_err(Failure::refused)?;
    let table = table_name(&cfg.table_name).map_err(Failure::refused)?;
    // The address just checked is the one dialled, and only it; the name stays for TLS.
    let addr = dial.resolve(&target.host, target.port).await?[0];
    dial.reached.dialled(addr);
    let (client, broke) = open(target, addr, cfg.password.as_deref(), cfg.ssl_root_cert.as_deref()).await?;
    let mut link = Some(Link { fingerprint: fingerprint.to_vec(), addr, broke: Some(broke), client, insert: None });
    let made = prepare(&mut link, &table).await;
    match made {
        Ok(insert) => {
            let mut made = link.expect("kept");
            made.insert = Some(insert);
            Ok(made)
        }
        Err(e) => Err(match e.as_db_error() {
            Some(db) => Failure::refused(format!("Postgres refused the table `{}`: {}", cfg.table_name, db.message())),
            None => Failure::connect(format!("Postgres went away: {}", reason(&e, &mut link).await)),
        }),
    }
}

/// Dials `addr` and speaks through [`Capped`] up to the first `ReadyForQuery`; the
/// connection then runs in a task of its own, and why it ended comes on the receiver.
async fn open(
    target: Target,
    addr: SocketAddr,
    password: Option<&str>,
    root_cert: Option<&str>,
) -> Result<(Client, oneshot::Receiver<String>), Failure> {
    let mut pg = target.config;
    pg.ssl_mode(target.tls.mode);
    if let Some(p) = password {
        pg.password(p.as_bytes());
    }
    pg.application_name("hookgate-destination");
    let mut tls = tls::tenant_connector(&target.tls, root_cert).map_err(|e| Failure::refused(e.to_string()))?;
    let tls = MakeTlsConnect::<Capped<tokio::net::TcpStream>>::make_tls_connect(&mut tls, &target.host)
        .map_err(|e| Failure::refused(format!("`url`: {e}")))?;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| Failure::connect(format!("connecting to Postgres failed: {e}")))?;
    // A connection that went half open (a failover, a dropped NAT entry) is
    // noticed in about a minute rather than the system's two hours.
    let socket = socket2::SockRef::from(&stream);
    let _ = socket.set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(Duration::from_secs(30)));
    let _ = socket.set_tcp_user_timeout(Some(Duration::from_secs(60)));
    let _ = stream.set_nodelay(true);
    let stream = Capped::raw(stream, target.tls.mode != SslMode::Disable);
    // The server's own words when it answered (a missing database, a refused
    // password); tokio-postgres shows only "db error" for them.
    let (client, connection) = pg.connect_raw(stream, CapTls(tls)).await.map_err(|e| match e.as_db_error() {
        Some(db) => {
            Failure::refused(format!("Postgres refused the connection: {} ({})", db.message(), db.code().code()))
        }
        None => Failure::connect(format!("connecting to Postgres failed: {}", with_causes(&e))),
    })?;
    let (tell, broke) = oneshot::channel();
    tokio::spawn(async move {
        // Ends when the client is dropped or the server goes away (or sends too much).
        if let Err(e) = connection.await {
            let _ = tell.send(with_causes(&e));
        }
    });
    Ok((client, broke))
}

/// The table, made if missing, and the insert prepared.
async fn prepare(link: &mut Option<Link>, table: &str) -> Result<Statement, tokio_postgres::Error> {
    let client = &link.as_ref().expect("just made").client;
    // Made only when missing: a role that may only insert into an existing table
    // (no CREATE on its schema, the default since Postgres 15) still delivers.
    let exists = client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await?;
    if !exists.get::<_, bool>(0) {
        client.batch_execute(&create_sql(table)).await?;
    }
    client.prepare(&insert_sql(table)).await
}

/// An error and its causes in one line (tokio-postgres says only "error
/// communicating with the server", the cause after it).
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(e.source(), |c| c.source()).fold(e.to_string(), |text, c| format!("{text}: {c}"))
}

/// Why a statement failed: the connection's own error when it ended (a message
/// over the cap, a reset), waited for a second at most; else the client's.
async fn reason(e: &tokio_postgres::Error, link: &mut Option<Link>) -> String {
    let Some(broke) = link.as_mut().filter(|l| l.client.is_closed()).and_then(|l| l.broke.take()) else {
        return e.to_string();
    };
    match tokio::time::timeout(Duration::from_secs(1), broke).await {
        Ok(Ok(why)) => why,
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Postgres backend on 127.0.0.1 that speaks just enough of the protocol: it
    /// takes the startup message, says the password is fine, sends `startup` (its
    /// messages before `ReadyForQuery`), then `idle` while the client waits, and
    /// answers one simple query.
    async fn backend(startup: Vec<Vec<u8>>, idle: Vec<Vec<u8>>) -> SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let len = s.read_u32().await.unwrap() as usize;
            let mut startup_message = vec![0; len - 4];
            s.read_exact(&mut startup_message).await.unwrap();
            let ready = [message(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]), message(b'Z', b"I")].concat();
            let before = [vec![message(b'R', &[0, 0, 0, 0])], startup, vec![ready]].concat();
            for (i, m) in before.iter().chain(&idle).enumerate() {
                // The client stops reading once it has ended the connection.
                if s.write_all(m).await.is_err() {
                    return;
                }
                if i + 1 == before.len() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            // A simple query: its completion comes after everything sent above.
            let mut kind = [0u8; 1];
            if s.read_exact(&mut kind).await.is_err() {
                return;
            }
            let len = s.read_u32().await.unwrap() as usize;
            let mut query = vec![0; len - 4];
            s.read_exact(&mut query).await.unwrap();
            let done = [message(b'C', b"SELECT 1\0"), message(b'Z', b"I")].concat();
            let _ = s.write_all(&done).await;
            let _ = s.read(&mut kind).await;
        });
        addr
    }

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        [vec![kind], (body.len() as u32 + 4).to_be_bytes().to_vec(), body.to_vec()].concat()
    }

    /// A ParameterStatus message: a name and its value.
    fn parameter(name: &str, value_len: usize) -> Vec<u8> {
        let body = [name.as_bytes(), b"\0", &vec![b'x'; value_len], b"\0"].concat();
        message(b'S', &body)
    }

    fn notice(len: usize) -> Vec<u8> {
        let body = [b"SNOTICE\0C00000\0M".as_slice(), &vec![b'x'; len], b"\0\0"].concat();
        message(b'N', &body)
    }

    async fn open_at(addr: SocketAddr) -> Result<(Client, oneshot::Receiver<String>), Failure> {
        let target = parse_url(&format!("postgres://u@127.0.0.1:{}/db?sslmode=disable", addr.port())).unwrap();
        open(target, addr, None, None).await
    }

    /// Why the connection ended, or `None` if it is still open after `within`.
    async fn ended(broke: oneshot::Receiver<String>, within: Duration) -> Option<String> {
        tokio::time::timeout(within, broke).await.ok().map(|r| r.unwrap_or_else(|_| "closed".into()))
    }

    #[tokio::test]
    async fn a_server_that_floods_parameters_or_notices_at_startup_fails_the_connect() {
        let many_large = (0..1000).map(|i| parameter(&format!("p{i}"), 60 * 1024)).collect();
        let many_small = (0..300).map(|i| parameter(&format!("p{i}"), 8)).collect();
        let notices = (0..1000).map(|_| notice(60 * 1024)).collect();
        for (what, startup) in [("large parameters", many_large), ("many parameters", many_small), ("notices", notices)]
        {
            let addr = backend(startup, Vec::new()).await;
            match open_at(addr).await {
                Ok(_) => panic!("{what}: the connection was made, holding all of it"),
                Err(f) => assert!(f.text.contains("may make a connection keep"), "{what}: {}", f.text),
            }
        }
    }

    #[tokio::test]
    async fn a_server_that_sends_new_parameters_while_the_connection_idles_ends_it() {
        let startup = vec![parameter("server_version", 4), parameter("client_encoding", 4)];
        let many_large = (0..2000).map(|i| parameter(&format!("p{i}"), 60 * 1024)).collect();
        let many_small = (0..300).map(|i| parameter(&format!("p{i}"), 8)).collect();
        for (what, idle) in [("large", many_large), ("small", many_small)] {
            let (_client, broke) = open_at(backend(startup.clone(), idle).await).await.expect("a plain startup");
            let why = ended(broke, Duration::from_secs(10)).await;
            let why = why.unwrap_or_else(|| panic!("{what}: the connection is still open, holding every parameter"));
            assert!(why.contains("may make a connection keep"), "{what}: {why}");
        }
    }

    #[tokio::test]
    async fn a_parameter_the_server_reports_again_and_again_is_counted_once() {
        // As a trigger's `SET application_name` would, at every insert.
        let startup = vec![parameter("application_name", 16)];
        let idle = (0..2000).map(|_| parameter("application_name", 1024)).collect();
        let (client, broke) = open_at(backend(startup, idle).await).await.expect("a plain startup");
        client.batch_execute("SELECT 1").await.expect("answered after every repeat was read");
        assert!(ended(broke, Duration::from_millis(200)).await.is_none(), "still open");
    }
}
