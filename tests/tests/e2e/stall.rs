//! Bounded waits: a stalled Postgres (every process SIGSTOPped, connections open)
//! gets 503s within seconds from ingress, the API and `/readyz`, and everything
//! recovers when it resumes, without a restart; delivery results made meanwhile,
//! or held up by a row lock, are recorded as they happened once they can be.

use std::time::{Duration, Instant};

use hookgate_tests::{
    app::Tenant,
    providers,
    servers::PgServer,
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_stall_test_secret";

#[tokio::test]
async fn a_stalled_postgres_answers_503_within_seconds_and_the_retry_is_admitted_once() {
    let pg = PgServer::start();
    let app = TestApp::spawn_on_server(&pg, "stall", |env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "2000".into());
    })
    .await;
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

/// Each delivery's status and attempt count, by message id; a claimed delivery
/// whose result is not written yet (a lease token, whether or not the lease has
/// run out) as sending, 3.
async fn deliveries_of(client: &tokio_postgres::Client) -> Vec<(String, i16, i64)> {
    client
        .query(
            "SELECT d.msg_id, CASE WHEN d.status = 1 AND d.lease_token IS NOT NULL THEN 3::smallint ELSE d.status END,
                (SELECT count(*) FROM attempts a WHERE a.msg_id = d.msg_id)
             FROM deliveries d ORDER BY d.msg_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// Waits until every delivery of the database succeeded with one attempt, or
/// panics after `within` showing where they stand.
async fn all_delivered_once(client: &tokio_postgres::Client, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let rows = deliveries_of(client).await;
        if rows.len() == n && rows.iter().all(|(_, status, attempts)| *status == 0 && *attempts == 1) {
            return;
        }
        assert!(Instant::now() < deadline, "not every delivery succeeded with one attempt recorded: {rows:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A row lock on one delivery while its result waits to be written, for longer
/// than a result refused used to be tried: the others land at once, and its own
/// lands when the lock goes, recorded as it happened (before, it was quarantined
/// after three tries of its one-second lock timeout, its attempt lost).
#[tokio::test]
async fn a_result_held_up_by_a_row_lock_is_recorded_when_the_lock_goes_and_holds_up_no_other() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "1000".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { delay: Duration::from_millis(1500), ..Behaviour::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let mut msgs = Vec::new();
    for i in 0..3 {
        msgs.push(t.message(&a, "x", json!({"i": i})).await["id"].as_str().unwrap().to_owned());
    }
    // All three in flight; the first one's row locked until well after they end.
    sink.wait_for(3, Duration::from_secs(10)).await;
    let mut locker = app.db.client().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM deliveries WHERE msg_id = $1 FOR UPDATE", &[&msgs[0]]).await.unwrap();
    let watcher = app.db.client().await;
    let locked_at = Instant::now();
    loop {
        let rows = deliveries_of(&watcher).await;
        let others: Vec<_> = rows.iter().filter(|(m, ..)| *m != msgs[0]).collect();
        if others.iter().all(|(_, s, n)| *s == 0 && *n == 1) {
            break;
        }
        assert!(locked_at.elapsed() < Duration::from_secs(8), "the others land while the lock holds: {rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Held well past the three one-second tries a refused result used to get.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(locked_at.elapsed())).await;
    let rows = deliveries_of(&watcher).await;
    let mine = rows.iter().find(|(m, ..)| *m == msgs[0]).unwrap();
    assert_eq!((mine.1, mine.2), (3, 0), "the locked one still waits, neither failed nor lost: {rows:?}");
    tx.rollback().await.unwrap();
    all_delivered_once(&watcher, 3, Duration::from_secs(15)).await;
    assert_eq!(sink.received().len(), 3, "none sent twice");
}

/// One locked row holds up the recording of every other tenant's results for
/// about a second (the batch's lock timeout), not for two statement timeouts
/// (about 10.5 s with the default 5 s, as before: the recorder waits on a batch
/// before it takes the next, and split a batch only after its second timeout):
/// neither another tenant's result in the same batch, nor one in a later batch.
#[tokio::test]
async fn a_locked_row_holds_up_other_tenants_results_for_a_second_not_two_statement_timeouts() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.tenant().await, app.tenant().await);
    let (slow_a, slow_b, fast) = (Sink::start().await, Sink::start().await, Sink::start().await);
    for sink in [&slow_a, &slow_b] {
        sink.set(Behaviour { delay: Duration::from_millis(1500), ..Behaviour::default() });
    }
    let app_a = a.application().await;
    a.endpoint(&app_a, &slow_a.url, json!({})).await;
    let app_b = b.application().await;
    b.endpoint(&app_b, &slow_b.url, json!({})).await;
    let later_b = b.application().await;
    b.endpoint(&later_b, &fast.url, json!({})).await;
    // A's and B's requests in flight together: their results come back in one batch.
    let (locked, together) = futures_util::join!(a.message(&app_a, "x", json!({})), b.message(&app_b, "x", json!({})));
    let (locked, together) = (locked["id"].as_str().unwrap().to_owned(), together["id"].as_str().unwrap().to_owned());
    slow_a.wait_for(1, Duration::from_secs(10)).await;
    slow_b.wait_for(1, Duration::from_secs(10)).await;
    // A's row locked while its request is in flight: its result meets the lock.
    let mut locker = app.db.client().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM deliveries WHERE msg_id = $1 FOR UPDATE", &[&locked]).await.unwrap();
    // Its answer comes 1.5 s after the request arrived.
    let answered = Instant::now() + Duration::from_millis(1500);
    succeeded_within(&b, &app_b, &together, answered, Duration::from_secs(4)).await;
    eprintln!("recorded {:?} after its answer, in the locked one's batch", answered.elapsed());
    // Another delivery of B's, finished while A's result still waits on the lock.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let msg = b.message(&later_b, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    fast.wait_for(1, Duration::from_secs(10)).await;
    let answered = Instant::now();
    succeeded_within(&b, &later_b, &msg, answered, Duration::from_secs(3)).await;
    eprintln!("recorded {:?} after its answer, in a later batch", answered.elapsed());
    tx.rollback().await.unwrap();
    // The locked one lands when the lock goes.
    succeeded_within(&a, &app_a, &locked, Instant::now(), Duration::from_secs(15)).await;
}

/// Waits until the message's delivery to its one endpoint is recorded a success,
/// or panics once `within` has passed since `from`.
async fn succeeded_within(t: &Tenant<'_>, app: &str, msg: &str, from: Instant, within: Duration) {
    loop {
        let d = t.get(&format!("/api/v1/app/{app}/msg/{msg}/endpoint")).await;
        if d["data"][0]["status"] == 0 {
            return;
        }
        assert!(from.elapsed() < within, "not recorded a success within {within:?}: {d}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Postgres stalled (SIGSTOP, connections open) for 45 seconds while deliveries
/// are in flight: every result waits in the worker and is written when Postgres
/// answers again; none is marked failed, none loses its attempt row.
#[tokio::test]
async fn results_waiting_through_a_45_second_postgres_stall_are_all_recorded_as_they_happened() {
    let pg = PgServer::start();
    let app = TestApp::spawn_on_server(&pg, "stall_results", |env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "2000".into());
        // Longer than the stall: no claim runs out meanwhile.
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "120".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { delay: Duration::from_secs(2), ..Behaviour::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    for i in 0..10 {
        t.message(&a, "x", json!({"i": i})).await;
    }
    sink.wait_for(10, Duration::from_secs(10)).await;
    pg.pause();
    tokio::time::sleep(Duration::from_secs(45)).await;
    pg.resume();
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    all_delivered_once(&client, 10, Duration::from_secs(30)).await;
    assert_eq!(sink.received().len(), 10, "none sent twice");
}

/// Tallies of what commits nothing (here: refused signatures) whose write
/// commits only after Hookgate gave up on it (its commit held by a synchronous
/// standby that is not there, then let go): written again meanwhile, counted once.
#[tokio::test]
async fn usage_whose_write_commits_after_it_was_given_up_is_counted_once() {
    let pg = PgServer::start();
    let app = TestApp::spawn_on_server(&pg, "stall", |env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "500".into());
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "1000".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let source =
        t.post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a}), 201).await;
    let src = source["id"].as_str().unwrap().to_owned();
    let admin = hookgate_tests::db::connect(&pg.url()).await;
    let usage = || async {
        let row =
            admin.query_one("SELECT COALESCE(sum(rejected_signature), 0)::bigint FROM usage_days", &[]).await.unwrap();
        row.get::<_, i64>(0)
    };
    // From now on every commit waits for a standby that is not there: a statement
    // runs, its commit waits, and Hookgate gives up on it after its bound.
    admin.batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'").await.unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    for n in 0..5 {
        let body = format!(r#"{{"id": "evt_{n}"}}"#);
        let res = app
            .http
            .post(app.url(&format!("/in/{src}")))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe("whsec_wrong", providers::now(), body.as_bytes()))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
    }
    // Several writes of the tallies are given up meanwhile (one a second).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(usage().await, 0, "nothing visible while the commits wait");
    admin.batch_execute("ALTER SYSTEM RESET synchronous_standby_names").await.unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while usage().await < 5 {
        assert!(Instant::now() < deadline, "the tallies are written once the commits go through");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(usage().await, 5, "five refusals, counted once");
}
