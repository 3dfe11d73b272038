//! Bounded waits: a stalled Postgres (every process SIGSTOPped, connections open)
//! gets 503s within seconds from ingress, the API and `/readyz`, and everything
//! recovers when it resumes, without a restart.

use std::time::{Duration, Instant};

use hookgate_tests::{app::default_env, process::hookgate, providers, servers::PgServer, sink::Sink, TestApp, TestDb};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_stall_test_secret";

#[tokio::test]
async fn a_stalled_postgres_answers_503_within_seconds_and_the_retry_is_admitted_once() {
    let pg = PgServer::start();
    let db = TestDb { name: "stall".into(), url: pg.url() };
    let mut env = default_env(&db);
    env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
    env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "2000".into());
    let key = env["HOOKGATE_MASTER_KEY"].clone();
    let out =
        hookgate(&[("DATABASE_URL", &pg.url()), ("HOOKGATE_MASTER_KEY", &key)]).arg("migrate").output().await.unwrap();
    assert!(out.status.success());
    let app = TestApp::spawn_on(db, env).await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source =
        t.post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a}), 201).await;
    let src = source["id"].as_str().unwrap().to_owned();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let send = |id: &str| {
        let body = format!(r#"{{"id": "{id}", "type": "invoice.paid"}}"#);
        http.post(app.url(&format!("/in/{src}")))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), body.as_bytes()))
            .body(body)
            .send()
    };
    // Warm: pooled connections exist and the source is known.
    assert_eq!(send("evt_warm").await.unwrap().status(), 200);
    sink.wait_for(1, Duration::from_secs(10)).await;

    pg.pause();
    let started = Instant::now();
    let res = send("evt_stalled").await.unwrap();
    let took = started.elapsed();
    assert_eq!(res.status(), 503, "ingress during the stall");
    assert!(took < Duration::from_secs(10), "ingress answered after {took:?}");
    eprintln!("ingress answered 503 after {took:?} with Postgres stopped");
    let started = Instant::now();
    let res = t.req(Method::GET, "/api/v1/app").send().await.unwrap();
    assert_eq!((res.status().as_u16(), started.elapsed() < Duration::from_secs(10)), (503, true), "the API");
    assert!(res.headers().contains_key("x-request-id"), "a 503 carries its request id too");
    let started = Instant::now();
    let res = http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!((res.status().as_u16(), started.elapsed() < Duration::from_secs(10)), (503, true), "/readyz");
    pg.resume();

    // The provider retries until it is answered: admitted once, delivered.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let res = send("evt_stalled").await.unwrap();
        if res.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "not admitted after the stall: {}", res.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(send("evt_stalled").await.unwrap().headers()["hookgate-duplicate"], "true");
    let events: Value = t.get(&format!("/api/v1/source/{src}/event")).await;
    assert_eq!(events["data"].as_array().unwrap().len(), 2, "evt_warm and evt_stalled, once each: {events}");
    sink.wait_for(2, Duration::from_secs(15)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.received().len(), 2);
    assert_eq!(http.get(app.url("/readyz")).send().await.unwrap().status(), 200);
}

/// A copy whose original is committed but cannot be read in time (here: its row
/// locked by another transaction) is answered 503, never a 2xx that names no
/// event; once the original can be read, the retry is told its id.
#[tokio::test]
async fn a_copy_whose_original_cannot_be_read_answers_503_and_its_retry_names_the_event() {
    // No Redis: the copy must go to Postgres to learn it is a duplicate.
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let src = t.stripe_source(&a, SECRET, json!({})).await;
    let body = r#"{"id": "evt_locked", "type": "invoice.paid"}"#;
    let first = app.send_stripe(&src, SECRET, body).await;
    assert_eq!(first.status(), 200);
    let id = first.json::<Value>().await.unwrap()["eventId"].as_str().unwrap().to_owned();

    let mut locker = app.db.client().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM inbound_events WHERE id = $1 FOR UPDATE", &[&id]).await.unwrap();
    let res = app.send_stripe(&src, SECRET, body).await;
    let status = res.status().as_u16();
    let answer: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 503, "a copy whose original is locked: {answer}");
    assert_eq!(answer["code"], "unavailable", "{answer}");
    tx.rollback().await.unwrap();

    let res = app.send_stripe(&src, SECRET, body).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["hookgate-duplicate"], "true");
    assert_eq!(res.json::<Value>().await.unwrap()["eventId"], id.as_str(), "the retry names the original");
    let n: i64 = app.db.client().await.query_one("SELECT count(*) FROM inbound_events", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
}
