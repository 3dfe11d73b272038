//! Fair delivery by endpoint queues: one endpoint's backlog, slowness or throttle
//! delays no other tenant's deliveries, and a throttled backlog waits without its
//! rows being rewritten.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use hookgate_gateway::Role;
use hookgate_tests::{
    app::default_env,
    sink::{Behaviour, Sink},
    TestApp, TestDb,
};
use serde_json::json;

/// An API process now, and a worker on the same database once the test has put
/// its backlog in place; the worker polls every 50 ms and, if `concurrency` is
/// given, has that many requests in flight at most.
struct Split {
    db: TestDb,
    env: HashMap<String, String>,
    api: TestApp,
}

impl Split {
    async fn new(concurrency: Option<usize>) -> Self {
        let db = TestDb::new().await;
        let mut env = default_env(&db);
        if let Some(n) = concurrency {
            env.insert("HOOKGATE_WORKER_CONCURRENCY".into(), n.to_string());
        }
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "50".into());
        let api = TestApp::spawn_role(db.clone(), env.clone(), Role::Api).await;
        Split { db, env, api }
    }

    async fn start_worker(&self) -> TestApp {
        TestApp::spawn_role(self.db.clone(), self.env.clone(), Role::Worker).await
    }
}

#[tokio::test]
async fn a_slow_endpoints_backlog_does_not_hold_up_another_tenants_deliveries() {
    let split = Split::new(Some(8)).await;
    let api = &split.api;
    let (slow, fast) = (Sink::start().await, Sink::start().await);
    slow.set(Behaviour { delay: Duration::from_millis(300), ..Default::default() });
    let a = api.tenant().await;
    let a_app = a.application().await;
    a.endpoint(&a_app, &slow.url, json!({})).await;
    for chunk in 0..4 {
        let sends = (0..10).map(|i| a.message(&a_app, "bulk", json!({"n": chunk * 10 + i})));
        futures_util::future::join_all(sends).await;
    }
    // A's 40 are due before anything of B's exists.
    let _worker = split.start_worker().await;
    slow.wait_for(1, Duration::from_secs(20)).await;

    let b = api.tenant().await;
    let b_app = b.application().await;
    b.endpoint(&b_app, &fast.url, json!({})).await;
    for i in 0..20 {
        b.message(&b_app, "quick", json!({"i": i})).await;
    }
    fast.wait_for(20, Duration::from_secs(20)).await;
    let a_done = slow.received().len();
    // Served in due order, A's 40 would all go first (at most 8 at a time, 0.3 s each).
    assert!(a_done < 40, "B's 20 arrived only after A's backlog ({a_done} of 40 sent to A by then)");

    // And A's backlog is delivered in full.
    let got = slow.wait_for(40, Duration::from_secs(60)).await;
    let ids: std::collections::HashSet<_> = got.iter().filter_map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 40, "every one of A's messages");
}

#[tokio::test]
async fn a_throttled_backlog_waits_without_being_rewritten() {
    let split = Split::new(None).await;
    let (db, api) = (&split.db, &split.api);
    let sink = Sink::start().await;
    let t = api.tenant().await;
    let app = t.application().await;
    let ep = t.endpoint(&app, &sink.url, json!({"throttleRate": 5})).await;
    let ep = ep["id"].as_str().unwrap().to_owned();
    for chunk in 0..5 {
        let sends = (0..20).map(|i| t.message(&app, "bulk", json!({"n": chunk * 20 + i})));
        futures_util::future::join_all(sends).await;
    }
    let _worker = split.start_worker().await;
    let client = db.client().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let p = waiting_versions(&client, Some(&ep)).await;
        if p.len() >= 50 || Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(first.len() >= 50, "the backlog waits ({} rows)", first.len());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rewritten = rewritten(&first, &waiting_versions(&client, Some(&ep)).await);
    // One worker holds its throttled endpoint off between slots and asks for one
    // delivery at a time: nothing waiting is rewritten (31 rows here when every
    // claim asked for a share; 6 when a claim could take one more while the
    // previous one was still on its way to its throttle check).
    assert_eq!(rewritten, 0, "waiting rows rewritten while they waited");
    // The rate still holds: at most 5 in any second.
    at_most_per_second(&sink.wait_for(15, Duration::from_secs(20)).await, 5);
}

/// Versions of the deliveries waiting and never tried nor claimed (of one
/// endpoint, or of all), by message and endpoint: a rewrite makes a new version.
async fn waiting_versions(client: &tokio_postgres::Client, endpoint: Option<&str>) -> HashMap<String, String> {
    let rows = client
        .query(
            "SELECT msg_id || ' ' || endpoint_id, xmin::text FROM deliveries
             WHERE ($1::text IS NULL OR endpoint_id = $1) AND status = 1 AND attempts = 0 AND lease_token IS NULL",
            &[&endpoint],
        )
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// How many of the `first` versions are rows rewritten since (the rows gone count not).
fn rewritten(first: &HashMap<String, String>, later: &HashMap<String, String>) -> usize {
    first.iter().filter(|(id, version)| later.get(*id).is_some_and(|v| v != *version)).count()
}

/// No more than `n` of the requests arrived within any one second.
fn at_most_per_second(got: &[hookgate_tests::sink::Received], n: usize) {
    let times: Vec<_> = got.iter().map(|r| r.at).collect();
    for (i, start) in times.iter().enumerate() {
        let in_window = times[i..].iter().filter(|t| t.duration_since(*start) < Duration::from_secs(1)).count();
        assert!(in_window <= n, "{in_window} deliveries within one second from delivery {i}");
    }
}

#[tokio::test]
async fn an_applications_throttled_backlog_across_its_endpoints_waits_without_being_rewritten() {
    let split = Split::new(None).await;
    let (db, api) = (&split.db, &split.api);
    let sink = Sink::start().await;
    let t = api.tenant().await;
    let made = t.post("/api/v1/app", json!({"name": "throttled", "throttleRate": 5}), 201).await;
    let app = made["id"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        t.endpoint(&app, &sink.url, json!({})).await;
    }
    for chunk in 0..2 {
        let sends = (0..20).map(|i| t.message(&app, "bulk", json!({"n": chunk * 20 + i})));
        futures_util::future::join_all(sends).await;
    }
    let _worker = split.start_worker().await;
    let client = db.client().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let first = waiting_versions(&client, None).await;
    assert!(first.len() >= 90, "the backlog of 120 waits ({} rows)", first.len());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rewritten = rewritten(&first, &waiting_versions(&client, None).await);
    // The application's throttle holds all three endpoints off between its slots:
    // one of them is asked at a time, and nothing waiting is claimed only to be
    // written back.
    assert_eq!(rewritten, 0, "waiting rows rewritten while they waited");
    at_most_per_second(&sink.wait_for(10, Duration::from_secs(20)).await, 5);
}

/// Endpoints whose deliveries are all retried later (or in flight) take no room
/// from a claim: due work behind them in the listing order goes at once.
#[tokio::test]
async fn endpoints_with_nothing_due_do_not_hold_up_due_deliveries_listed_after_them() {
    let split = Split::new(Some(8)).await;
    let (db, api) = (&split.db, &split.api);
    let idle = Sink::start().await;
    // Two tenants created first (their ids sort first), each with a delivery
    // retried in ten hours.
    for _ in 0..2 {
        let t = api.tenant().await;
        let app = t.application().await;
        t.endpoint(&app, &idle.url, json!({})).await;
        t.message(&app, "later", json!({})).await;
    }
    let client = db.client().await;
    client.execute("UPDATE deliveries SET next_attempt_at = now() + interval '10 hours'", &[]).await.unwrap();
    let fast = Sink::start().await;
    let b = api.tenant().await;
    let b_app = b.application().await;
    b.endpoint(&b_app, &fast.url, json!({})).await;
    for i in 0..20 {
        b.message(&b_app, "now", json!({"i": i})).await;
    }
    let _worker = split.start_worker().await;
    // Before, the two idle endpoints were given the whole room and B nothing, claim after claim.
    fast.wait_for(20, Duration::from_secs(15)).await;
    assert!(idle.received().is_empty(), "nothing due went early");
}
