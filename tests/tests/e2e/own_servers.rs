//! What a destination may reach and what its server may send, against real servers on
//! loopback: Hookgate's own Postgres and Redis are never a destination's (when saved, or
//! at the address dialled), a destination URL sets no server settings, a server's
//! message over 64 KiB ends the connection, and whether an answer is a private
//! network's is told from the address dialled.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use hookgate_egress::{
    deliver::send::{Outcome, Request, Sender, PRIVATE_NOT_KEPT},
    destinations::{config::Config, Lookup, Outbound, Publishers},
    ssrf::Guard,
};
use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    own_services::OwnServices,
};
use hookgate_tests::{servers::PgServer, TestApp};
use reqwest::Method;
use serde_json::json;

const OWN: &str = "Hookgate's own database or Redis";

fn port_of(url: &str) -> u16 {
    reqwest::Url::parse(url).unwrap().port().unwrap()
}

fn loopback() -> Guard {
    Guard::new(vec!["127.0.0.1/32".parse().unwrap()])
}

fn outbound<'a>(headers: &'a [(String, String)]) -> Outbound<'a> {
    Outbound {
        app_id: "app_1",
        msg_id: "msg_1",
        event_type: "a.b",
        event_id: None,
        channels: None,
        payload: b"{}",
        content_type: "application/json",
        created_at: chrono::Utc::now(),
        timestamp: chrono::Utc::now().timestamp(),
        headers,
    }
}

async fn status_and_text(req: reqwest::RequestBuilder) -> (u16, String) {
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// The first attempt's `response` of a destination, within 30 s.
async fn first_response(t: &hookgate_tests::app::Tenant<'_>, app: &str, dest: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = t.get(&format!("/api/v1/app/{app}/attempt/endpoint/{dest}")).await;
        if let Some(first) = page["data"].as_array().and_then(|d| d.first()) {
            return first["response"].as_str().unwrap_or_default().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no attempt was recorded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_destination_or_endpoint_aimed_at_hookgates_own_database_or_redis_is_refused_when_saved() {
    // The quickstart's allow-list: loopback, where Hookgate's own servers are too.
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let pg = port_of(&app.env["DATABASE_URL"]);
    let redis = port_of(&app.env["REDIS_URL"]);
    let control_db = app.db.name.clone();
    let dest = format!("/api/v1/app/{a}/destination");
    for (config, field) in [
        (
            json!({"type": "postgres", "config": {"url": format!("postgres://hookgate@127.0.0.1:{pg}/{control_db}"), "tableName": "stolen"}}),
            "url",
        ),
        (
            json!({"type": "postgres", "config": {"url": format!("postgres://hookgate@localhost:{pg}/postgres"), "tableName": "stolen"}}),
            "url",
        ),
        (
            json!({"type": "rabbitMq", "config": {"uri": format!("amqp://guest:guest@localhost:{redis}/%2F"), "routingKey": "q"}}),
            "uri",
        ),
        (json!({"type": "fifoEndpoint", "config": {"url": format!("http://127.0.0.1:{redis}/")}}), "url"),
    ] {
        let (status, text) = status_and_text(t.req(Method::POST, &dest).json(&config)).await;
        assert_eq!(status, 422, "{config}: {text}");
        assert!(text.contains(&format!("`{field}` is refused")) && text.contains(OWN), "{config}: {text}");
    }
    let endpoint = t
        .req(Method::POST, &format!("/api/v1/app/{a}/endpoint"))
        .json(&json!({"url": format!("http://127.0.0.1:{redis}/")}));
    let (status, text) = status_and_text(endpoint).await;
    assert!(status == 422 && text.contains(OWN), "an HTTP endpoint at Redis's port: {status} {text}");

    // Another Postgres on loopback is a destination like any, and gets its row.
    let other = PgServer::start();
    let created =
        t.post(&dest, json!({"type": "postgres", "config": {"url": other.url(), "tableName": "hooks"}}), 201).await;
    t.message(&a, "a.b", json!({"n": 1})).await;
    assert_eq!(first_response(&t, &a, created["id"].as_str().unwrap()).await, "inserted");
    let control = app.db.client().await;
    let stolen = control.query_one("SELECT to_regclass('stolen') IS NOT NULL", &[]).await.unwrap();
    assert!(!stolen.get::<_, bool>(0), "nothing was made in Hookgate's own database");
}

#[tokio::test]
async fn a_destination_that_reaches_hookgates_own_database_when_it_connects_is_blocked_and_writes_nothing() {
    // A destination saved before its name pointed here (or saved before this check):
    // the connect decides on the address it dials.
    let app = TestApp::spawn().await;
    let pg = port_of(&app.env["DATABASE_URL"]);
    let own = OwnServices::of(&[app.env["DATABASE_URL"].as_str()], &app.env["REDIS_URL"]);
    let guard = loopback().protecting(Arc::new(own));
    let url = format!("postgres://hookgate@localhost:{pg}/{}", app.db.name);
    let cfg = Config::parse("postgres", json!({"url": url, "tableName": "stolen"}), &loopback()).unwrap();
    let key = (TenantId::generate(), AppId::from_db("app_1".into()), EndpointId::from_db("ep_1".into()));
    let sender = Sender::new(guard.clone(), Duration::from_secs(2), Duration::from_secs(5), None, true);
    let headers = Vec::new();
    let sent = Publishers::default()
        .publish(&key, b"1", &cfg, &guard, &sender, &outbound(&headers), Duration::from_secs(10), false)
        .await;
    assert_eq!(sent.outcome, Outcome::Blocked, "{}", sent.body);
    assert!(sent.body.contains(OWN), "{}", sent.body);
    let control = app.db.client().await;
    let stolen = control.query_one("SELECT to_regclass('stolen') IS NOT NULL", &[]).await.unwrap();
    assert!(!stolen.get::<_, bool>(0), "a table was made in Hookgate's own database");
}

#[tokio::test]
async fn a_postgres_destination_url_that_sets_server_settings_is_refused_naming_the_parameter() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let other = PgServer::start();
    for (query, named) in [
        ("options=-c%20search_path%3Dpg_catalog", "options"),
        ("application_name=psql", "application_name"),
        ("sslmode=disable&keepalives=0", "keepalives"),
    ] {
        let config =
            json!({"type": "postgres", "config": {"url": format!("{}?{query}", other.url()), "tableName": "t"}});
        let req = t.req(Method::POST, &format!("/api/v1/app/{a}/destination")).json(&config);
        let (status, text) = status_and_text(req).await;
        assert_eq!(status, 422, "{query}: {text}");
        assert!(text.contains(&format!("may not set `{named}`")), "{query}: {text}");
    }
    let fine = format!("{}?sslmode=disable&connect_timeout=5", other.url());
    t.post(
        &format!("/api/v1/app/{a}/destination"),
        json!({"type": "postgres", "config": {"url": fine, "tableName": "t"}}),
        201,
    )
    .await;
}

#[tokio::test]
async fn a_message_over_64_kib_from_a_destinations_server_ends_the_connection_before_it_is_read() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    // A real Postgres whose table answers each insert with a 4 MiB notice.
    let other = PgServer::start();
    let (client, conn) = tokio_postgres::connect(&other.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE TABLE hooks (id text PRIMARY KEY, event_type text NOT NULL, event_id text, channels text[],
                 payload jsonb, body bytea, content_type text NOT NULL, created_at timestamptz NOT NULL,
                 delivered_at timestamptz NOT NULL DEFAULT now());
             CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN RAISE NOTICE '%', repeat('x', 4 * 1024 * 1024); RETURN NEW; END $$;
             CREATE TRIGGER shout BEFORE INSERT ON hooks FOR EACH ROW EXECUTE FUNCTION shout();",
        )
        .await
        .unwrap();
    let dest = t
        .post(
            &format!("/api/v1/app/{a}/destination"),
            json!({"type": "postgres", "config": {"url": format!("{}?sslmode=disable", other.url()), "tableName": "hooks"}}),
            201,
        )
        .await;
    t.message(&a, "a.b", json!({"n": 1})).await;
    let said = first_response(&t, &a, dest["id"].as_str().unwrap()).await;
    assert!(said.contains("at most 64 KiB"), "the connection ended at the notice's header: {said}");
}

#[tokio::test]
async fn a_private_answer_is_judged_by_the_address_dialled_not_by_resolving_the_name_again() {
    // A name that resolves to loopback when the destination connects, and to nothing
    // afterwards: a rebinding name. Nothing but loopback is ever answered.
    let other = PgServer::start();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let port = other.port;
    let lookup: Lookup = Arc::new(move |host: String, _port: u16| {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        Box::pin(async move {
            match (host.as_str(), first) {
                ("rebind.test", true) => Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]),
                _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")),
            }
        })
    });
    // A database that is not there: the server refuses in its own words.
    let url = format!("postgres://hookgate@rebind.test:{port}/no_such_database?sslmode=disable");
    let cfg = Config::parse("postgres", json!({"url": url, "tableName": "hooks"}), &loopback()).unwrap();
    let headers = Vec::new();
    for hide in [true, false] {
        calls.store(0, Ordering::SeqCst);
        let publishers = Publishers::with_lookup(lookup.clone());
        let key = (TenantId::generate(), AppId::from_db("app_1".into()), EndpointId::from_db("ep_1".into()));
        let sender = Sender::new(loopback(), Duration::from_secs(2), Duration::from_secs(5), None, true);
        let sent = publishers
            .publish(&key, b"1", &cfg, &loopback(), &sender, &outbound(&headers), Duration::from_secs(10), hide)
            .await;
        assert_eq!(sent.outcome, Outcome::Refused, "{}", sent.body);
        match hide {
            true => assert_eq!(sent.body, PRIVATE_NOT_KEPT, "the loopback server's words were kept"),
            false => assert!(sent.body.contains("no_such_database"), "{}", sent.body),
        }
    }
}

/// A listener on loopback that counts the connections it accepts and the bytes
/// they carry, and answers each request it reads with `200 ok`.
async fn counting_listener() -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (conns, bytes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, b) = (conns.clone(), bytes.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let b = b.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf).await {
                    b.fetch_add(n, Ordering::SeqCst);
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                    }
                }
            });
        }
    });
    (port, conns, bytes)
}

#[tokio::test]
async fn an_endpoint_named_by_a_host_that_resolves_to_hookgates_own_server_is_refused_on_the_connection_and_sent_nothing(
) {
    // Hookgate's database is a listener that counts what reaches it; its Redis is the tests' own.
    let (db_port, db_conns, db_bytes) = counting_listener().await;
    let (other_port, _, other_bytes) = counting_listener().await;
    let redis = std::env::var("HOOKGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:16580/".into());
    let redis_port = reqwest::Url::parse(&redis).unwrap().port().unwrap_or(6379);
    let own = OwnServices::of(&[format!("postgres://hookgate@127.0.0.1:{db_port}/hookgate").as_str()], &redis);
    let guard = loopback().protecting(Arc::new(own));
    // A made-up name that answers 127.0.0.1, as a tenant's DNS could.
    let lookup: Lookup = Arc::new(|host: String, port: u16| {
        Box::pin(async move {
            match host.as_str() {
                "control.test" => Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]),
                _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")),
            }
        })
    });
    let sender = Sender::resolving_with(guard, Duration::from_secs(2), Duration::from_secs(5), lookup);
    let request = |port: u16| Request {
        url: format!("http://control.test:{port}/hook"),
        headers: Default::default(),
        body: b"{}".to_vec(),
        put: false,
    };
    for port in [db_port, redis_port] {
        let sent = sender.send(request(port)).await;
        assert_eq!(sent.outcome, Outcome::Blocked, "port {port}: {}", sent.body);
        assert!(sent.body.contains(OWN), "port {port}: {}", sent.body);
        assert!(!sent.body.contains("127.0.0.1"), "the address the tenant's name resolved to is shown: {}", sent.body);
    }
    // The same name at another port of loopback is any receiver.
    let sent = sender.send(request(other_port)).await;
    assert_eq!((sent.outcome, sent.body.as_str()), (Outcome::Success, "ok"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(other_bytes.load(Ordering::SeqCst) > 0);
    assert!(db_conns.load(Ordering::SeqCst) <= 1, "connected once at most, and closed at once");
    assert_eq!(db_bytes.load(Ordering::SeqCst), 0, "no byte of the request reached Hookgate's database");
}
