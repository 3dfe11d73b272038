//! The delivery engine under the conditions an agency lives with: thousands of
//! customer endpoints failing and waiting on retries, throttled applications,
//! several workers, and results that must be recorded exactly as they happened.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use futures_util::{stream, StreamExt};
use hookgate_gateway::Role;
use hookgate_tests::{
    app::default_env,
    sink::{Behaviour, Sink},
    TestApp, TestDb,
};
use reqwest::Method;
use serde_json::{json, Value};

/// An API process, and as many workers as asked for on the same database.
async fn split(workers: usize, edit: impl FnOnce(&mut HashMap<String, String>)) -> (TestApp, Vec<TestApp>) {
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    edit(&mut env);
    let api = TestApp::spawn_role(db.clone(), env.clone(), Role::Api).await;
    let mut ws = Vec::new();
    for _ in 0..workers {
        ws.push(TestApp::spawn_role(db.clone(), env.clone(), Role::Worker).await);
    }
    (api, ws)
}

/// Waits until `sql` (one bigint) reaches `want`, or panics after `within`.
async fn until_count(db: &TestDb, sql: &str, want: i64, within: Duration) {
    let client = db.client().await;
    let deadline = Instant::now() + within;
    loop {
        let n: i64 = client.query_one(sql, &[]).await.unwrap().get(0);
        if n >= want {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {n} of {want} within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_newer_tenants_message_is_delivered_within_a_second_behind_5000_endpoints_in_backoff() {
    // Every failed attempt is retried only after an hour: the older tenants'
    // deliveries all wait on their retries while the newer tenant sends.
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "3600".into());
    })
    .await;
    let failing = Sink::start().await;
    failing.set(Behaviour { status: 500, ..Behaviour::default() });
    // Ten tenants of five applications with a hundred endpoints each (the most
    // an application may have by default).
    const TENANTS: usize = 10;
    const APPS: usize = 5;
    const PER_APP: usize = 100;
    let mut older = Vec::new();
    for _ in 0..TENANTS {
        let t = app.tenant().await;
        let mut apps = Vec::new();
        for _ in 0..APPS {
            apps.push(t.application().await);
        }
        older.push((t, apps));
    }
    // Their customers' endpoints, as an agency's onboarding makes them.
    let base = &failing.url;
    let creations = older.iter().flat_map(|(t, apps)| {
        apps.iter().flat_map(move |a| {
            (0..PER_APP).map(move |i| async move { t.endpoint(a, &format!("{base}/customer/{i}"), json!({})).await })
        })
    });
    stream::iter(creations).buffer_unordered(16).collect::<Vec<_>>().await;
    // One event each, fanned out to every endpoint, attempted once and failed.
    for (t, apps) in &older {
        for a in apps {
            t.message(a, "order.created", json!({"n": 1})).await;
        }
    }
    let waiting = (TENANTS * APPS * PER_APP) as i64;
    until_count(
        &app.db,
        "SELECT count(*) FROM deliveries WHERE status = 1 AND attempts = 1 AND next_attempt_at > now() + interval '30 minutes'",
        waiting,
        Duration::from_secs(120),
    )
    .await;

    // A tenant onboarded after them sends one message at a time.
    let newer = app.tenant().await;
    let ok = Sink::start().await;
    let a = newer.application().await;
    newer.endpoint(&a, &ok.url, json!({})).await;
    let mut took = Vec::new();
    for i in 0..5 {
        let sent = Instant::now();
        newer.message(&a, "invoice.paid", json!({"i": i})).await;
        ok.wait_for(i + 1, Duration::from_secs(30)).await;
        took.push(sent.elapsed());
    }
    eprintln!("newer tenant, behind {waiting} endpoints in backoff: {took:?}");
    assert!(took.iter().all(|t| *t < Duration::from_secs(1)), "each within a second: {took:?}");
    // Not tried again: every older delivery still has its one attempt (the sink may
    // have missed one whose connection failed under the load, never seen more).
    let again = app.db.client().await.query_one("SELECT count(*) FROM deliveries WHERE attempts > 1", &[]).await;
    assert_eq!(again.unwrap().get::<_, i64>(0), 0, "the older tenants' endpoints were not tried again");
    assert!(failing.received().len() <= waiting as usize, "the older tenants' endpoints were not tried again");
}

#[tokio::test]
async fn a_resend_held_by_its_throttle_stays_a_manual_attempt() {
    let (api, _workers) = split(2, |_| {}).await;
    let t = api.tenant().await;
    let sink = Sink::start().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let mut msgs = Vec::new();
    for i in 0..6 {
        msgs.push(t.message(&a, "x", json!({"i": i})).await["id"].as_str().unwrap().to_owned());
    }
    sink.wait_for(6, Duration::from_secs(20)).await;
    // Recorded, not only received: a resend of a delivery still in flight keeps
    // that delivery's own (scheduled) trigger, as it should.
    until_count(&api.db, "SELECT count(*) FROM attempts", 6, Duration::from_secs(10)).await;
    // The application is throttled to one a second, then every message resent at once:
    // two workers take them, the throttle holds all but one at a time.
    let res = t.req(Method::PATCH, &format!("/api/v1/app/{a}")).json(&json!({"throttleRate": 1})).send().await.unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    for m in &msgs {
        let res = t.req(Method::POST, &format!("/api/v1/app/{a}/msg/{m}/endpoint/{ep}/resend")).send().await.unwrap();
        assert_eq!(res.status(), 202);
    }
    sink.wait_for(12, Duration::from_secs(30)).await;
    for m in &msgs {
        let attempts: Value = t.get(&format!("/api/v1/app/{a}/attempt/msg/{m}")).await;
        let mut data = attempts["data"].as_array().unwrap().clone();
        data.sort_by_key(|x| x["timestamp"].as_str().unwrap_or_default().to_owned());
        let triggers: Vec<&Value> = data.iter().map(|x| &x["triggerType"]).collect();
        assert_eq!(triggers, vec![&json!(0), &json!(1)], "scheduled, then the manual resend: {attempts}");
    }
}

#[tokio::test]
async fn two_workers_disabling_one_endpoint_report_it_once() {
    // Disabled by the first failure after its streak began; no retries: every failure is final.
    let (api, _workers) = split(2, |env| {
        env.insert("HOOKGATE_DISABLE_AFTER_SECS".into(), "0".into());
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "".into());
    })
    .await;
    let t = api.tenant().await;
    let ops = Sink::start().await;
    t.post("/api/v1/operational-webhook/endpoint", json!({"url": ops.url}), 201).await;
    let failing = Sink::start().await;
    failing.set(Behaviour { status: 500, ..Behaviour::default() });
    let a = t.application().await;
    let ep = t.endpoint(&a, &failing.url, json!({})).await["id"].as_str().unwrap().to_owned();
    // Its failing streak starts.
    t.message(&a, "x", json!({"first": true})).await;
    failing.wait_for(1, Duration::from_secs(20)).await;
    let client = api.db.client().await;
    until_count(&api.db, "SELECT count(*) FROM endpoints WHERE failing_since IS NOT NULL", 1, Duration::from_secs(10))
        .await;
    // The endpoint's row held while both workers' failures come back: both
    // recorders then disable it at the same moment, one waiting for the other.
    let mut locker = api.db.client().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM endpoints WHERE id = $1 FOR UPDATE", &[&ep]).await.unwrap();
    let t = &t;
    futures_util::future::join_all((0..20).map(|i| t.message(&a, "x", json!({"i": i})))).await;
    failing.wait_for(21, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tx.rollback().await.unwrap();
    until_count(&api.db, "SELECT count(*) FROM deliveries WHERE status = 2", 21, Duration::from_secs(30)).await;
    let disabled: bool = client.query_one("SELECT disabled FROM endpoints WHERE id = $1", &[&ep]).await.unwrap().get(0);
    assert!(disabled, "the endpoint is disabled");
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM messages WHERE event_type = 'endpoint.disabled'
             AND convert_from(payload, 'UTF8')::jsonb -> 'data' ->> 'endpointId' = $1",
            &[&ep],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "endpoint.disabled notices");
}
