//! Chaos: ingress and API traffic together over 3 Hookgate processes while one is
//! SIGKILLed, Postgres is paused for 5 s, Redis is flushed and then stopped, and
//! one endpoint answers hostile bodies. Afterwards: every admitted event admitted
//! exactly once and forwarded, every accepted message delivered to every endpoint,
//! every delivery recorded, and the surviving processes alive.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use hookgate_tests::{
    app::default_env,
    process::{hookgate, Served},
    providers,
    servers::{PgServer, RedisServer},
    sink::{Behaviour, Sink},
    TestApp, TestDb,
};
use serde_json::{json, Value};

const EVENTS: usize = 150;
const COPIES: usize = 3;
const MESSAGES: usize = 150;
const SECRET: &str = "whsec_chaos_test_secret";

/// Sends until a 2xx, from instance `first` on, skipping dead ones; the body's
/// answer, or `None` if nothing answered 2xx within the attempts.
async fn until_2xx(
    http: &reqwest::Client,
    bases: &[String],
    first: usize,
    request: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
) -> Option<Value> {
    for attempt in 0..200 {
        let base = &bases[(first + attempt) % bases.len()];
        if let Ok(res) = request(http, base).send().await {
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            // 409 `conflict` for a message: its eventId exists, an earlier try committed
            // although its answer was lost. That is the message accepted.
            if (200..300).contains(&status) || (status == 409 && body["code"] == "conflict") {
                return Some(body);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test]
async fn under_kills_stalls_and_a_lost_redis_nothing_is_lost_or_doubled() {
    let pg = PgServer::start();
    let mut redis = RedisServer::start();
    let db = TestDb::on("chaos", &pg.url());
    let mut env = default_env(&db);
    env.insert("REDIS_URL".into(), redis.url());
    for (k, v) in [
        ("HOOKGATE_DB_TIMEOUT_MS", "1000"),
        ("HOOKGATE_DB_STATEMENT_TIMEOUT_MS", "2000"),
        ("HOOKGATE_EGRESS_TIMEOUT_SECS", "2"),
        ("HOOKGATE_DELIVERY_LEASE_SECS", "3"),
        ("HOOKGATE_RETRY_SCHEDULE", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"),
        ("HOOKGATE_WORKER_POLL_MS", "200"),
    ] {
        env.insert(k.into(), v.into());
    }
    let out = hookgate(&[("DATABASE_URL", &pg.url()), ("HOOKGATE_MASTER_KEY", &env["HOOKGATE_MASTER_KEY"])])
        .arg("migrate")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let mut procs = Vec::new();
    for _ in 0..3 {
        procs.push(Served::start(&env, "all").await);
    }
    let bases: Arc<Vec<String>> = Arc::new(procs.iter().map(|p| p.url("")).collect());
    // Set up through the first process, as a tenant would.
    let admin =
        TestApp { base: bases[0].clone(), port: procs[0].port, metrics_port: 0, db, http: reqwest::Client::new(), env };
    let t = admin.tenant().await;
    let (good, hostile) = (Sink::start().await, Sink::start().await);
    hostile.set(Behaviour { body: Some(b"a\0b\xff".to_vec()), ..Behaviour::default() });
    let a = t.application().await;
    t.endpoint(&a, &good.url, json!({})).await;
    t.endpoint(&a, &hostile.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a});
    let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let key = t.key.clone();

    let http = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().unwrap();
    let mut tasks = Vec::new();
    for e in 0..EVENTS {
        for c in 0..COPIES {
            let (http, bases, src) = (http.clone(), bases.clone(), src.clone());
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis((e * 60 + c * 7) as u64)).await;
                let event = format!(r#"{{"id": "evt_chaos_{e}", "type": "chaos.in"}}"#);
                let sent = until_2xx(&http, &bases, e + c, |h, base| {
                    providers::stripe_post(h, &format!("{base}/in/{src}"), SECRET, &event)
                })
                .await;
                ("in", e, sent)
            }));
        }
    }
    for m in 0..MESSAGES {
        let (http, bases, a, key) = (http.clone(), bases.clone(), a.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis((m * 60) as u64)).await;
            // The eventId makes the retry of a message safe, whatever the outcome of a try.
            let sent = until_2xx(&http, &bases, m, |h, base| {
                h.post(format!("{base}/api/v1/app/{a}/msg"))
                    .bearer_auth(&key)
                    .json(&json!({"eventType": "chaos.out", "eventId": format!("m{m}"), "payload": {"m": m}}))
            })
            .await;
            ("msg", m, sent)
        }));
    }

    // The faults, while the traffic runs (about nine seconds of it).
    tokio::time::sleep(Duration::from_millis(1000)).await;
    procs[2].kill().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    pg.pause();
    tokio::time::sleep(Duration::from_secs(5)).await;
    pg.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis_flush(&redis.url()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.stop();

    let mut admitted: HashMap<usize, HashSet<String>> = HashMap::new();
    let (mut copies_answered, mut messages_accepted, mut unanswered) = (0, 0, 0);
    for task in tasks {
        let (kind, n, sent) = task.await.unwrap();
        match (kind, sent) {
            ("in", Some(v)) => {
                copies_answered += 1;
                admitted.entry(n).or_default().insert(v["eventId"].as_str().unwrap_or_default().to_owned());
            }
            ("msg", Some(_)) => messages_accepted += 1,
            _ => unanswered += 1,
        }
    }
    // Every copy of an event names the same admitted event.
    let doubled: Vec<_> = admitted.iter().filter(|(_, ids)| ids.len() != 1).collect();
    let db_client = admin.db.client().await;
    let rows: i64 =
        db_client.query_one("SELECT count(*) FROM inbound_events WHERE status = 'accepted'", &[]).await.unwrap().get(0);

    // Every message (API and admitted events) reaches both endpoints, once recorded.
    let expected = rows as usize + MESSAGES;
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut to_good, mut to_hostile);
    loop {
        to_good =
            good.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect::<HashSet<_>>();
        to_hostile =
            hostile.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect::<HashSet<_>>();
        let unsettled: i64 =
            db_client.query_one("SELECT count(*) FROM deliveries WHERE status <> 0", &[]).await.unwrap().get(0);
        if to_good.len() >= expected && to_hostile.len() >= expected && unsettled == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the faults: {} and {} of {expected} delivered, {unsettled} unsettled",
            to_good.len(),
            to_hostile.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let messages: i64 = db_client.query_one("SELECT count(*) FROM messages", &[]).await.unwrap().get(0);
    let unrecorded: i64 = db_client
        .query_one(
            "SELECT count(*) FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM attempts a
                WHERE a.tenant_id = d.tenant_id AND a.app_id = d.app_id AND a.msg_id = d.msg_id
                  AND a.endpoint_id = d.endpoint_id AND a.status = 0)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let alive = {
        let mut n = 0;
        for p in &procs[..2] {
            n += usize::from(http.get(p.url("/healthz")).send().await.is_ok_and(|r| r.status().is_success()));
        }
        n
    };
    eprintln!(
        "chaos: {EVENTS} events x {COPIES} copies ({copies_answered} answered 2xx), {MESSAGES} API messages \
         ({messages_accepted} accepted, {unanswered} never answered 2xx); faults: 1 SIGKILL, Postgres paused 5 s, \
         Redis flushed then stopped, 1 hostile endpoint; admitted {rows} events, {} doubled; {messages} messages; \
         delivered {} / {} of {expected}; unrecorded deliveries {unrecorded}; processes alive {alive}/2",
        doubled.len(),
        to_good.len(),
        to_hostile.len(),
    );
    assert!(doubled.is_empty(), "copies of one event admitted as different events: {doubled:?}");
    let stored: HashSet<String> =
        db_client.query("SELECT id FROM inbound_events", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let answered: HashSet<String> = admitted.values().flatten().cloned().collect();
    assert!(answered.is_subset(&stored), "every event answered 2xx is in Postgres");
    assert_eq!(rows as usize, EVENTS, "every event was eventually admitted, once");
    assert_eq!(messages as usize, rows as usize + MESSAGES, "one message per admitted event and per API message");
    assert_eq!(unrecorded, 0, "every delivery has its successful attempt recorded");
    assert_eq!(alive, 2);
}

async fn redis_flush(url: &str) {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _ = s.write_all(b"*1\r\n$8\r\nFLUSHALL\r\n").await;
        let mut buf = [0u8; 16];
        let _ = s.read(&mut buf).await;
    }
}
