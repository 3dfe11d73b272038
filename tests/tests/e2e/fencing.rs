//! Fencing: every write after a claim applies only while the claimant still owns
//! the row. A stale owner (its lease ran out, someone else took over) can neither
//! overwrite, release nor complete its successor's work.

use std::time::Duration;

use hookgate_gateway::Role;
use hookgate_shared::{
    db,
    ids::AttemptId,
    status::DeliveryStatus,
    store::{
        deliveries::{self, AttemptRecord, Outcome},
        queues::{self, Want},
        results, wakes,
    },
};
use hookgate_tests::{
    app::default_env,
    providers,
    servers::RedisServer,
    sink::{Behaviour, Sink},
    TestApp, TestDb,
};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_fencing_test_secret";

#[tokio::test]
async fn sync_mode_a_stale_owner_can_neither_release_nor_complete_its_successors_row() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_SYNC_LEASE_SECS".into(), "1".into());
    })
    .await;
    // Each forward takes 2.5 s, longer than the lease; the first one fails.
    let sink = Sink::start().await;
    sink.set(Behaviour { delay: Duration::from_millis(2500), fail_first: 1, ..Behaviour::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a, "mode": "sync"});
    let source = t.post("/api/v1/source", body, 201).await;
    let src = source["id"].as_str().unwrap().to_owned();
    let event = r#"{"id": "evt_fenced", "type": "invoice.paid"}"#;
    let send = || {
        app.http
            .post(app.url(&format!("/in/{src}")))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), event.as_bytes()))
            .body(event)
            .send()
    };
    // A takes the row and forwards; its lease runs out while the endpoint is slow.
    let first = tokio::spawn(send());
    tokio::time::sleep(Duration::from_millis(1400)).await;
    // B, the provider's retry, takes over and forwards again.
    let second = send().await.unwrap();
    let first = first.await.unwrap().unwrap();
    // A's forward failed: it answers 502, but must not release B's row.
    assert_eq!(first.status(), 502, "{}", first.text().await.unwrap());
    assert_eq!(second.status(), 200, "{}", second.text().await.unwrap());
    let events: Value = t.get(&format!("/api/v1/source/{src}/event")).await;
    let data = events["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "B's admission is in Postgres: {events}");
    assert_eq!(data[0]["status"], "completed");
    let again = send().await.unwrap();
    assert_eq!((again.status().as_u16(), again.headers()["hookgate-duplicate"].to_str().unwrap()), (200, "true"));
}

fn outcome(c: &deliveries::Claimed, status: DeliveryStatus, success: bool) -> Outcome {
    Outcome {
        tenant_id: c.tenant_id.clone(),
        app_id: c.app_id.clone(),
        msg_id: c.msg_id.clone(),
        endpoint_id: c.endpoint_id.clone(),
        lease: c.lease,
        trigger: c.trigger,
        attempt: Some(AttemptRecord {
            id: AttemptId::generate(),
            url: "http://127.0.0.1:9/".into(),
            success,
            status_code: if success { 200 } else { 500 },
            response: String::new(),
            duration_ms: 1,
            at: chrono::Utc::now(),
            request_headers: "{}".into(),
            bytes: 2,
        }),
        status,
        next_attempt_at: None,
        disable_endpoint: false,
        notice: None,
    }
}

/// Claims what is due, as a worker with room for ten per endpoint would.
async fn claim_all(conn: &db::Client, lease: Duration) -> Vec<deliveries::Claimed> {
    let (listed, _) =
        wakes::due(conn, &Default::default(), &Default::default(), &Default::default(), 100).await.unwrap();
    let mut claimed = Vec::new();
    for l in listed {
        let want = Want { app_id: l.queue.app_id, endpoint_id: l.queue.endpoint_id, room: 10, range: None };
        claimed.extend(queues::claim(conn, &l.queue.tenant_id, &[want], queues::Lease::from_now(lease)).await.unwrap());
    }
    claimed
}

#[tokio::test]
async fn a_delivery_result_recorded_after_its_lease_does_not_overwrite_the_next_claim() {
    // No worker in this process: the test claims and records as two workers would.
    let test_db = TestDb::new().await;
    let env = default_env(&test_db);
    let app = TestApp::spawn_role(test_db, env, Role::Api).await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, "http://127.0.0.1:9/hook", json!({})).await;
    t.message(&a, "x", json!({})).await;
    let pool = db::pool(&app.db.url, 2, Duration::from_secs(2), Duration::from_secs(5), db::Plans::Chosen).unwrap();
    let mut conn = db::conn(&pool).await.unwrap();
    let lease = Duration::from_millis(300);
    let old = claim_all(&conn, lease).await;
    assert_eq!(old.len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let new = claim_all(&conn, lease).await;
    assert_eq!(new.len(), 1, "the lease ran out: another worker takes it");
    results::record(&mut conn, &[outcome(&new[0], DeliveryStatus::Success, true)], Duration::from_secs(3600), None)
        .await
        .unwrap();
    // The first worker's late failure is refused: the row stays as its owner left it.
    let late = outcome(&old[0], DeliveryStatus::Failed, false);
    let applied = results::record(&mut conn, &[late], Duration::from_secs(3600), None).await.unwrap();
    assert_eq!(applied.stale, 1, "the stale write is reported");
    let state = t.get(&format!("/api/v1/app/{a}/msg/{}/endpoint", new[0].msg_id)).await;
    assert_eq!(state["data"][0]["status"], 0, "{state}");
    // Its attempt happened, so it is kept: two attempts, the owner's success first.
    let attempts = t.get(&format!("/api/v1/app/{a}/attempt/msg/{}", new[0].msg_id)).await;
    assert_eq!(attempts["data"].as_array().unwrap().len(), 2, "{attempts}");
}

/// Endpoint health goes by when attempts were made: a success recorded late (its
/// claim lost long ago) does not end a failure streak that began after it, while
/// one made after the streak began does; a failure recorded late does not begin a
/// streak after a later success. (Before, any success recorded cleared the streak,
/// so a stale one put off the endpoint's disabling, and any failure began one.)
#[tokio::test]
async fn a_success_recorded_late_does_not_end_a_failure_streak_that_began_after_it() {
    let test_db = TestDb::new().await;
    let env = default_env(&test_db);
    let app = TestApp::spawn_role(test_db, env, Role::Api).await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, "http://127.0.0.1:9/hook", json!({})).await["id"].as_str().unwrap().to_owned();
    t.message(&a, "x", json!({})).await;
    let pool = db::pool(&app.db.url, 2, Duration::from_secs(2), Duration::from_secs(5), db::Plans::Chosen).unwrap();
    let conn = db::conn(&pool).await.unwrap();
    let old = claim_all(&conn, Duration::from_millis(300)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let new = claim_all(&conn, Duration::from_secs(60)).await;
    assert_eq!((old.len(), new.len()), (1, 1));
    let watcher = app.db.client().await;
    let failing_since = || async {
        let row = watcher.query_one("SELECT failing_since FROM endpoints WHERE id = $1", &[&ep]).await.unwrap();
        row.get::<_, Option<chrono::DateTime<chrono::Utc>>>(0)
    };
    let record = |o: Outcome| {
        let pool = pool.clone();
        async move {
            let mut conn = db::conn(&pool).await.unwrap();
            results::record(&mut conn, &[o], Duration::from_secs(3600), None).await.unwrap();
        }
    };
    // The new owner's attempt fails: a streak begins.
    let mut failed = outcome(&new[0], DeliveryStatus::Pending, false);
    failed.next_attempt_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    record(failed).await;
    let since = failing_since().await.expect("a failure begins a streak");
    // The first owner's success, made ten seconds before that, recorded only now.
    let mut late = outcome(&old[0], DeliveryStatus::Success, true);
    late.attempt.as_mut().unwrap().at = chrono::Utc::now() - chrono::Duration::seconds(10);
    record(late).await;
    assert_eq!(failing_since().await, Some(since), "a success made before the streak began does not end it");
    // A success made now ends it.
    record(outcome(&old[0], DeliveryStatus::Success, true)).await;
    assert_eq!(failing_since().await, None, "a success made after the streak began ends it");
    // A failure made before that success, recorded only now, begins nothing.
    let mut stale = outcome(&old[0], DeliveryStatus::Pending, false);
    stale.attempt.as_mut().unwrap().at = chrono::Utc::now() - chrono::Duration::seconds(5);
    record(stale).await;
    assert_eq!(failing_since().await, None, "a failure made before the latest success does not begin a streak");
    // One made after it does.
    record(outcome(&old[0], DeliveryStatus::Pending, false)).await;
    assert!(failing_since().await.is_some(), "a failure made after the latest success begins a streak");
    // Disabled and enabled again: a failure made before the re-enabling (after the
    // latest success), recorded only now, begins nothing; one made after it does.
    let before = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for disabled in [true, false] {
        let res = t
            .req(Method::PATCH, &format!("/api/v1/app/{a}/endpoint/{ep}"))
            .json(&json!({ "disabled": disabled }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(failing_since().await, None, "re-enabling clears the streak");
    let mut stale = outcome(&old[0], DeliveryStatus::Pending, false);
    stale.attempt.as_mut().unwrap().at = before;
    record(stale).await;
    assert_eq!(failing_since().await, None, "a failure made before the re-enabling begins no streak");
    record(outcome(&old[0], DeliveryStatus::Pending, false)).await;
    assert!(failing_since().await.is_some(), "a failure made after the re-enabling begins a streak");
    drop(conn);
}

/// An API process, and a connection made as the delivery worker makes its own
/// (`db::Plans::Generic`), for tests that claim and record as the worker does.
async fn api_with_worker_conn() -> (TestApp, db::Client) {
    let test_db = TestDb::new().await;
    let env = default_env(&test_db);
    let app = TestApp::spawn_role(test_db, env.clone(), Role::Api).await;
    let config = hookgate_shared::Config::from_sources(None, &env).unwrap();
    let state = hookgate_shared::AppState::new(config).unwrap().with_generic_plans();
    let conn = db::conn(&state.db).await.unwrap();
    (app, conn)
}

/// The worker's batch statements are planned once per connection: left to
/// choose, Postgres planned the claim and the recorder afresh on every run (a plan
/// for one batch's values prunes partitions when it is made, so it always looked
/// cheaper), and that planning was 40 % of its time while delivering.
#[tokio::test]
async fn the_workers_statements_are_planned_once_not_on_every_run() {
    let (app, mut conn) = api_with_worker_conn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, "http://127.0.0.1:9/hook", json!({})).await;
    for i in 0..7 {
        t.message(&a, "x", json!({"i": i})).await;
        let claimed = claim_all(&conn, Duration::from_secs(60)).await;
        assert_eq!(claimed.len(), 1, "run {i}");
        let done = outcome(&claimed[0], DeliveryStatus::Success, true);
        results::record(&mut conn, &[done], Duration::from_secs(3600), None).await.unwrap();
    }
    let plans = conn
        .query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE NOT from_sql", &[])
        .await
        .unwrap();
    let runs: Vec<(String, i64, i64)> = plans.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    // The listing, the claim, and the recorder's attempts, states and health.
    let hot = runs.iter().filter(|(_, generic, custom)| generic + custom >= 7).count();
    assert!(hot >= 5, "statements run seven times: {runs:?}");
    for (statement, generic, custom) in &runs {
        assert_eq!(*custom, 0, "planned again on {custom} of {} runs: {statement}", generic + custom);
    }
}

/// `statement` planned again as `conn` plans it, generically: the values do not
/// matter, so every parameter is NULL.
async fn generic_plan(conn: &db::Client, statement: &str) -> String {
    let params = (1..=60).rev().find(|i| statement.contains(&format!("${i}"))).unwrap_or(0);
    conn.batch_execute(&format!("PREPARE probe AS {statement}")).await.unwrap();
    let nulls = vec!["NULL"; params].join(", ");
    let sql = if params == 0 { "EXPLAIN EXECUTE probe".into() } else { format!("EXPLAIN EXECUTE probe({nulls})") };
    let plan: Vec<String> = conn.query(&sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    conn.batch_execute("DEALLOCATE probe").await.unwrap();
    plan.join("\n")
}

/// A generic plan is made once, from the statistics of the moment. Made over a
/// fresh partition of a few rows, the recorder's plans read the whole partition
/// for every batch (a hash join over a sequential scan), a cost that grew with
/// every row of the day until autovacuum analyzed it again.
#[tokio::test]
async fn the_workers_plans_made_over_a_nearly_empty_partition_still_look_rows_up_by_key() {
    let (app, mut conn) = api_with_worker_conn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, "http://127.0.0.1:9/hook", json!({})).await;
    // Statistics say the day's partitions hold a row or two when the plans are made.
    for i in 0..2 {
        t.message(&a, "x", json!({"i": i})).await;
    }
    app.db.client().await.batch_execute("ANALYZE messages; ANALYZE deliveries; ANALYZE attempts").await.unwrap();
    let claimed = claim_all(&conn, Duration::from_secs(60)).await;
    assert_eq!(claimed.len(), 2);
    let done: Vec<Outcome> = claimed.iter().map(|c| outcome(c, DeliveryStatus::Success, true)).collect();
    results::record(&mut conn, &done, Duration::from_secs(3600), None).await.unwrap();
    // Each statement the worker prepared, planned again as its connection plans it.
    let prepared = conn
        .query("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|s| s.contains("deliveries") || s.contains("messages") || s.contains("attempts"))
        .collect::<Vec<_>>();
    assert!(prepared.len() >= 3, "the claim and the recorder's statements: {prepared:?}");
    let reads_whole = |plan: &str| {
        plan.contains("Hash Join")
            || plan.contains("Merge Join")
            || ["messages_p", "deliveries_p", "attempts_p"].iter().any(|t| plan.contains(&format!("Seq Scan on {t}")))
    };
    // With Postgres's defaults, at least one of them would read a partition whole.
    conn.batch_execute("SET enable_hashjoin = on; SET enable_mergejoin = on; SET enable_seqscan = on").await.unwrap();
    let mut defaults = Vec::new();
    for statement in &prepared {
        defaults.push(generic_plan(&conn, statement).await);
    }
    assert!(defaults.iter().any(|p| reads_whole(p)), "the defaults planned every statement by key: {defaults:#?}");
    conn.batch_execute("RESET enable_hashjoin; RESET enable_mergejoin; RESET enable_seqscan").await.unwrap();
    for statement in &prepared {
        let plan = generic_plan(&conn, statement).await;
        assert!(!reads_whole(&plan), "a worker statement reads a partition whole:\n{statement}\n{plan}");
    }
}

/// A resend clears the fencing token, so the worker still holding the delivery
/// cannot undo it with its late verdict.
#[tokio::test]
async fn a_resend_accepted_while_the_delivery_is_in_flight_is_not_undone_by_the_holder() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_WORKER_CONCURRENCY".into(), "1".into());
        // The in-flight attempt is the last of its schedule.
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "".into());
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "5".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "6".into());
    })
    .await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    // The endpoint is slow, and its first answer is a 500.
    sink.set(Behaviour { delay: Duration::from_millis(2000), fail_first: 1, ..Behaviour::default() });
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    // The operator fixed the endpoint and resends, while the first try is in flight.
    let res = t.req(Method::POST, &format!("/api/v1/app/{a}/msg/{msg}/endpoint/{ep}/resend")).send().await.unwrap();
    assert_eq!(res.status(), 202);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let d = t.get(&format!("/api/v1/app/{a}/msg/{msg}/endpoint")).await;
    let got = sink.received().len();
    eprintln!("after the resend: endpoint got {got} requests, delivery {}", d["data"][0]);
    assert_eq!(got, 2, "the acknowledged resend was never sent; delivery: {}", d["data"][0]);
}

#[tokio::test]
async fn a_slow_request_can_neither_release_nor_answer_for_the_key_its_successor_took_over() {
    use hookgate_shared::store::idempotency::{self, Claim, StoredResponse};
    let db = TestDb::new().await;
    let pool = db::pool(&db.url, 2, Duration::from_secs(2), Duration::from_secs(5), db::Plans::Chosen).unwrap();
    let conn = db::conn(&pool).await.unwrap();
    let ttl = Duration::from_secs(3600);
    let Claim::Run(first, _) = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap() else {
        panic!("the first request runs")
    };
    // It runs past the takeover delay: the client's retry takes the key over.
    let client = db.client().await;
    client.execute("UPDATE idempotency_keys SET created_at = now() - interval '2 minutes'", &[]).await.unwrap();
    let Claim::Run(second, _) = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap() else {
        panic!("the retry takes the key over")
    };
    assert_ne!(first, second);
    // The first request's failure does not release the key its successor holds...
    assert!(!idempotency::release(&**conn, "tnt_x", "k", first).await.unwrap());
    // ...nor does its late answer become the key's.
    let late = StoredResponse { status: 500, headers: vec![], body: b"late".to_vec() };
    assert!(!idempotency::finish(&**conn, "tnt_x", "k", first, None, &late).await.unwrap());
    let own = StoredResponse { status: 201, headers: vec![], body: b"own".to_vec() };
    assert!(idempotency::finish(&**conn, "tnt_x", "k", second, None, &own).await.unwrap());
    let Claim::Replay(kept) = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap() else {
        panic!("the key replays")
    };
    assert_eq!((kept.status, kept.body), (201, b"own".to_vec()));
}

/// An answer kept after its request ended (the database was failing over) is
/// kept only by the server that took the claim: another (a standby promoted
/// meanwhile, which may lack the effect) refuses it, and the key can still be
/// released by its holder.
#[tokio::test]
async fn an_answer_kept_late_is_kept_only_by_the_server_that_took_the_claim() {
    use hookgate_shared::store::idempotency::{self, Claim, Server, StoredResponse};
    let db = TestDb::new().await;
    let pool = db::pool(&db.url, 2, Duration::from_secs(2), Duration::from_secs(5), db::Plans::Chosen).unwrap();
    let conn = db::conn(&pool).await.unwrap();
    let ttl = Duration::from_secs(3600);
    let Claim::Run(token, server) = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap()
    else {
        panic!("the request runs")
    };
    let answer = StoredResponse { status: 202, headers: vec![], body: b"msg".to_vec() };
    let elsewhere = Server("978307200000000".into());
    assert!(!idempotency::finish(&**conn, "tnt_x", "k", token, Some(&elsewhere), &answer).await.unwrap());
    let Claim::Running = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap() else {
        panic!("another server kept nothing: the key is still running")
    };
    assert!(idempotency::finish(&**conn, "tnt_x", "k", token, Some(&server), &answer).await.unwrap());
    let Claim::Replay(kept) = idempotency::claim(&**conn, "tnt_x", "k", &[b"fp".to_vec()], ttl).await.unwrap() else {
        panic!("the claim's own server kept it")
    };
    assert_eq!((kept.status, kept.body), (202, b"msg".to_vec()));
}

/// Time spent between a claim and its request (here a throttle check waiting on
/// a stalled Redis) would leave the request in flight past its lease; the lease
/// is renewed first (fenced by the claim's token), so the request gets its whole
/// timeout and no other claim sends the delivery beside it. (Before, the request
/// had its whole timeout from whenever it started: the lease ran out under it
/// and the delivery went out a second time beside it.)
#[tokio::test]
async fn a_claim_that_waited_before_sending_renews_its_lease_so_its_request_is_never_in_flight_twice() {
    let redis = RedisServer::start();
    let url = redis.url();
    let app = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), url);
        // Connecting and the check each wait this long: about 6 s after the claim.
        env.insert("HOOKGATE_REDIS_TIMEOUT_MS".into(), "3000".into());
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "15".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "16".into());
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "300".into());
    })
    .await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    // Answers after 14 s: within the timeout, but past what is left of the lease.
    sink.set(Behaviour { delay: Duration::from_secs(14), ..Behaviour::default() });
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({"throttleRate": 100})).await;
    // The throttle's check waits out Redis's timeouts after the claim.
    redis.pause();
    let paused = std::time::Instant::now();
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let created = paused.elapsed();
    sink.wait_for(1, Duration::from_secs(20)).await;
    eprintln!("created after {created:?}, sent after {:?}", paused.elapsed());
    redis.resume();
    // Past the lease's end, and past the first request's answer.
    tokio::time::sleep(Duration::from_secs(17)).await;
    assert_eq!(sink.received().len(), 1, "the delivery went out again while its first request was in flight");
    let attempts = t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await;
    let first = &attempts["data"][0];
    assert_eq!(first["responseStatusCode"], 200, "the attempt had its whole timeout: {attempts}");
    assert_eq!(attempts["data"].as_array().map(Vec::len), Some(1), "{attempts}");
}
