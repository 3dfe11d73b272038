//! Delivery under faults: a worker killed mid-send, Redis stopped or flushed, and
//! a throttled endpoint shared by two workers.

use std::{collections::HashSet, time::Duration};

use hookgate_gateway::Role;
use hookgate_tests::{
    app::default_env,
    process::hookgate,
    servers::RedisServer,
    sink::{Behaviour, Sink},
    TestApp, TestDb,
};
use serde_json::json;

#[tokio::test]
async fn a_worker_killed_with_sigkill_mid_delivery_loses_none_of_1000() {
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "3".into());
    env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "2".into());
    env.insert("HOOKGATE_WORKER_POLL_MS".into(), "200".into());
    let api = TestApp::spawn_role(db.clone(), env.clone(), Role::Api).await;
    let sink = Sink::start().await;
    sink.set(Behaviour { delay: Duration::from_millis(20), ..Default::default() });
    let t = api.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let mut ids = HashSet::new();
    for chunk in 0..50 {
        let sends = (0..20).map(|i| t.message(&a, "bulk", json!({"n": chunk * 20 + i})));
        for m in futures_util::future::join_all(sends).await {
            ids.insert(m["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(ids.len(), 1000);

    let pairs: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut first = hookgate(&refs).args(["serve", "--role", "worker"]).spawn().unwrap();
    sink.wait_for(200, Duration::from_secs(60)).await;
    first.start_kill().unwrap(); // SIGKILL
    first.wait().await.unwrap();
    let at_kill = sink.received().len();
    assert!(at_kill < 1000, "killed mid-way ({at_kill} delivered)");

    let mut second = hookgate(&refs).args(["serve", "--role", "worker"]).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let delivered = loop {
        let got: HashSet<String> =
            sink.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
        if got.len() == ids.len() || std::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(delivered, ids, "every message delivered at least once");
    let client = db.client().await;
    let mut left = -1;
    for _ in 0..50 {
        left =
            client.query_one("SELECT count(*) FROM deliveries WHERE status <> 0", &[]).await.unwrap().get::<_, i64>(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(left, 0, "every delivery recorded as a success");
    second.start_kill().unwrap();
}

#[tokio::test]
async fn with_redis_stopped_or_flushed_creation_and_delivery_go_on() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let app = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), url);
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({"throttleRate": 1000})).await;
    t.message(&a, "x", json!({"phase": "up"})).await;
    sink.wait_for(1, Duration::from_secs(20)).await;

    redis.stop();
    for i in 0..5 {
        t.message(&a, "x", json!({"phase": "down", "i": i})).await;
    }
    sink.wait_for(6, Duration::from_secs(20)).await;

    redis.start_again();
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    std::io::Write::write_all(&mut conn, b"FLUSHALL\r\n").unwrap();
    for i in 0..5 {
        t.message(&a, "x", json!({"phase": "flushed", "i": i})).await;
    }
    sink.wait_for(11, Duration::from_secs(20)).await;
}

#[tokio::test]
async fn a_throttled_endpoint_never_receives_more_than_its_rate_with_two_workers() {
    throttled_by_two_workers(|_| {}).await;
}

#[tokio::test]
async fn on_a_redis_cluster_the_throttle_holds_across_two_workers() {
    let cluster = hookgate_tests::redis_cluster::RedisCluster::start();
    throttled_by_two_workers(|env| {
        env.insert("REDIS_URL".into(), cluster.url());
        env.insert("HOOKGATE_REDIS_CLUSTER".into(), "true".into());
    })
    .await;
    // Every delivery asked the cluster (the script runs as EVALSHA, or EVAL once loaded).
    let asked = cluster.calls("evalsha") + cluster.calls("eval");
    assert!(asked >= 20, "the spacing lives in the cluster: {asked} script calls");
}

async fn throttled_by_two_workers(edit: impl FnOnce(&mut std::collections::HashMap<String, String>)) {
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    env.insert("HOOKGATE_WORKER_POLL_MS".into(), "50".into());
    edit(&mut env);
    let api = TestApp::spawn_role(db.clone(), env.clone(), Role::Api).await;
    let _w1 = TestApp::spawn_role(db.clone(), env.clone(), Role::Worker).await;
    let _w2 = TestApp::spawn_role(db.clone(), env.clone(), Role::Worker).await;
    let sink = Sink::start().await;
    let t = api.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({"throttleRate": 5})).await;
    for i in 0..20 {
        t.message(&a, "x", json!({"i": i})).await;
    }
    let got = sink.wait_for(20, Duration::from_secs(30)).await;
    let times: Vec<_> = got.iter().map(|r| r.at).collect();
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..].iter().filter(|t| t.duration_since(*start) < Duration::from_secs(1)).count();
        assert!(in_window <= 5, "{in_window} deliveries within one second from delivery {i}");
    }
    let span = times.last().unwrap().duration_since(times[0]);
    assert!(span >= Duration::from_secs(3), "20 at 5/s take at least 3 s, took {span:?}");
}

#[tokio::test]
async fn a_disabled_tenants_deliveries_pause_and_resume_when_it_is_enabled_again() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { fail_first: 1, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    t.message(&a, "x", json!({})).await;
    sink.wait_for(1, Duration::from_secs(10)).await;
    // The first attempt failed; its retry is due in a second. The tenant is disabled first.
    let set = |disabled: bool| {
        app.admin(reqwest::Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
            .json(&json!({ "disabled": disabled }))
            .send()
    };
    assert_eq!(set(true).await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sink.received().len(), 1, "nothing is sent for a disabled tenant");
    assert_eq!(set(false).await.unwrap().status(), 200);
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"), "the same delivery, resumed");
}

#[tokio::test]
async fn a_delivery_paused_after_its_tenant_was_resumed_is_resumed_by_the_sweep() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { fail_first: 1, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    t.message(&a, "x", json!({})).await;
    sink.wait_for(1, Duration::from_secs(10)).await;
    let res = app
        .admin(reqwest::Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
        .json(&json!({ "disabled": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let client = app.db.client().await;
    let paused = "SELECT count(*) FROM deliveries WHERE status = 1 AND next_attempt_at IS NULL";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.query_one(paused, &[]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "the retry is paused by a claim");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The race: the operator's resume ran before that claim paused the row, so the
    // tenant is enabled and nothing made the row due. Modelled by enabling it in SQL.
    client.execute("UPDATE tenants SET disabled = false, enabled_at = now(), updated_at = now()", &[]).await.unwrap();
    let got = sink.wait_for(2, Duration::from_secs(15)).await;
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"), "the same delivery, resumed");
}

#[tokio::test]
async fn a_resend_of_a_delivery_still_in_its_schedule_keeps_the_schedule() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "30,30".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { fail_first: 10, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    // Failed once; its retry is 30 s away. The tenant resends now, and it fails again.
    let res = t.req(reqwest::Method::POST, &format!("/api/v1/app/{a}/msg/{msg}/endpoint/{ep}/resend")).send().await;
    assert_eq!(res.unwrap().status(), 202);
    sink.wait_for(2, Duration::from_secs(10)).await;
    // Its lease given back, it still waits for the scheduled retry (pending, due
    // in about 30 s), and the API shows it as Svix shows a delivery between tries:
    // `sending` (3) with its next attempt.
    let db = app.db.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = db
            .query_one(
                "SELECT status, lease_token IS NULL, next_attempt_at > now() + interval '10 seconds' FROM deliveries",
                &[],
            )
            .await
            .unwrap();
        let (status, free, later): (i16, bool, bool) = (row.get(0), row.get(1), row.get(2));
        if free {
            assert_eq!((status, later), (1, true), "still pending, its schedule kept");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the resend's lease was never given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = t.get(&format!("/api/v1/app/{a}/msg/{msg}/endpoint")).await;
    assert_eq!(d["data"][0]["status"].as_i64(), Some(3), "{d}");
    assert!(d["data"][0]["nextAttempt"].is_string(), "{d}");
}
