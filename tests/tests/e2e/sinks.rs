//! FIFO and polling endpoints under the conditions a review found them wrong
//! in: a tenant deleted or disabled mid-backlog, a receiver slower than the
//! lease's old cut, many resting keys, messages gone from under a batch, a seek
//! past a transaction that began before it wrote.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use hookgate_tests::{
    app::Tenant,
    sink::{Behaviour, Received, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

/// A FIFO destination of `app` sending to `url`, with `extra` fields; its id.
async fn fifo(t: &Tenant<'_>, app: &str, config: Value, extra: Value) -> String {
    let mut body = json!({"type": "fifoEndpoint", "config": config});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    t.post(&format!("/api/v1/app/{app}/destination"), body, 201).await["id"].as_str().unwrap().to_owned()
}

/// The message ids of the batches received, in the order they came.
fn ids(received: &[Received]) -> Vec<String> {
    received
        .iter()
        .flat_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        })
        .collect()
}

/// Publishes `n` messages one after another; their ids in order.
async fn publish(t: &Tenant<'_>, app: &str, n: usize) -> Vec<String> {
    let mut sent = Vec::new();
    for i in 0..n {
        sent.push(t.message(app, "x", json!({ "i": i })).await["id"].as_str().unwrap().to_owned());
    }
    sent
}

/// A tenant deleted, or disabled, stops its FIFO endpoints: no batch goes after
/// the one in flight (before, the runner's pick ignored the tenant, and the whole
/// backlog went out after the tenant was deleted). One disabled and enabled
/// again catches up, in order, from where it stopped.
#[tokio::test]
async fn a_deleted_or_disabled_tenants_fifo_endpoint_sends_nothing_more_and_one_enabled_again_catches_up() {
    let app = TestApp::spawn().await;
    for deleted in [true, false] {
        let t = app.tenant().await;
        let sink = Sink::start().await;
        // Slow enough that the backlog is still waiting when the tenant goes.
        sink.set(Behaviour { delay: Duration::from_millis(300), ..Behaviour::default() });
        let a = t.application().await;
        fifo(&t, &a, json!({"url": sink.url}), json!({"batchSize": 1})).await;
        let sent = publish(&t, &a, 20).await;
        sink.wait_for(1, Duration::from_secs(10)).await;
        let path = format!("/admin/v1/tenant/{}", t.id);
        let res = match deleted {
            true => app.admin(Method::DELETE, &path).send().await.unwrap(),
            false => app.admin(Method::PATCH, &path).json(&json!({"disabled": true})).send().await.unwrap(),
        };
        assert!(res.status().is_success(), "{}", res.status());
        let stopped = sink.received().len();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let later = sink.received().len();
        assert!(
            later <= stopped + 1,
            "{} batches went out after the tenant was {} (one was in flight at most)",
            later - stopped,
            if deleted { "deleted" } else { "disabled" }
        );
        if !deleted {
            let res = app.admin(Method::PATCH, &path).json(&json!({"disabled": false})).send().await.unwrap();
            assert_eq!(res.status(), 200);
            let got = sink.wait_for(20, Duration::from_secs(20)).await;
            assert_eq!(ids(&got), sent, "every message once, in order, after the tenant was enabled again");
        }
    }
}

/// With a lease of 6 s and a timeout of 5 s, a batch's request gets its whole
/// timeout: a receiver answering after 4 s is answered once and recorded as a
/// success; one answering after 8 s times out, is recorded as a failed attempt
/// and waits for its retry (30 s on). Before, a turn was cut at the lease less
/// 5 s (1 s here) with nothing recorded, and the same batch went out again every
/// lease, forever.
#[tokio::test]
async fn a_fifo_batch_gets_its_whole_timeout_and_one_that_times_out_is_recorded_and_waits_for_its_retry() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "5".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "6".into());
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "30".into());
    })
    .await;
    let t = app.tenant().await;
    let mut cases = Vec::new();
    for delay in [4, 8] {
        let sink = Sink::start().await;
        sink.set(Behaviour { delay: Duration::from_secs(delay), ..Behaviour::default() });
        let a = t.application().await;
        fifo(&t, &a, json!({"url": sink.url}), json!({})).await;
        let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
        cases.push((delay, sink, a, msg));
    }
    // Past two leases after the first request.
    tokio::time::sleep(Duration::from_secs(15)).await;
    for (delay, sink, a, msg) in &cases {
        assert_eq!(sink.received().len(), 1, "the receiver answering after {delay} s got the batch again");
        let attempts = t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await;
        let data = attempts["data"].as_array().unwrap();
        assert_eq!(data.len(), 1, "one attempt recorded: {attempts}");
        match delay {
            4 => assert_eq!((data[0]["status"].as_i64(), data[0]["responseStatusCode"].as_i64()), (Some(0), Some(200))),
            _ => assert_eq!((data[0]["status"].as_i64(), data[0]["responseStatusCode"].as_i64()), (Some(2), Some(0))),
        }
    }
}

/// Resting FIFO rows cost a pick nothing. 2,000 keys of a keyed FIFO endpoint,
/// each delivered and drained, then a minute passing (every scheduled time moved
/// back a minute, as the clock would): the pick, planned as the runners plan it,
/// touches a handful of buffers. Before, a drained row was due again a minute
/// later and every pick walked them all (50,000 resting keys: 290 ms and 150k
/// buffer hits a pick).
#[tokio::test]
async fn a_pick_touches_a_handful_of_buffers_however_many_fifo_keys_rest() {
    const KEYS: usize = 2000;
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    let a = t.application().await;
    fifo(&t, &a, json!({"url": sink.url, "key": "k"}), json!({})).await;
    let path = format!("/api/v1/app/{a}/msg");
    let mut pending = futures_util::stream::iter((0..KEYS).map(|i| {
        let req = t.req(Method::POST, &path).json(&json!({"eventType": "x", "payload": {"k": format!("key-{i}")}}));
        async move { assert_eq!(req.send().await.unwrap().status(), 202) }
    }))
    .buffer_unordered(32);
    while pending.next().await.is_some() {}
    sink.wait_for(KEYS, Duration::from_secs(120)).await;
    let db = app.db.client().await;
    // Every key's turn ended (drained), then a minute passes.
    let deadline = Instant::now() + Duration::from_secs(30);
    while db
        .query_one("SELECT count(*) FROM fifo_state WHERE lease_token IS NOT NULL", &[])
        .await
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        assert!(Instant::now() < deadline, "turns still held");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.execute("UPDATE fifo_state SET next_at = next_at - interval '61 seconds'", &[]).await.unwrap();
    db.batch_execute("VACUUM ANALYZE fifo_state").await.unwrap();
    // As the runners plan it (db::Plans::Generic), rolled back.
    db.batch_execute(
        "SET plan_cache_mode = force_generic_plan; SET enable_hashjoin = off; SET enable_mergejoin = off;
         SET enable_seqscan = off; BEGIN",
    )
    .await
    .unwrap();
    db.batch_execute(&format!("PREPARE pick(bigint, float8) AS {}", hookgate_shared::store::fifo::PICK)).await.unwrap();
    let plan: Value = db
        .query_one("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE pick(1, 30)", &[])
        .await
        .unwrap()
        .get::<_, Value>(0);
    db.batch_execute("ROLLBACK").await.unwrap();
    let top = &plan[0]["Plan"];
    let buffers = top["Shared Hit Blocks"].as_i64().unwrap() + top["Shared Read Blocks"].as_i64().unwrap();
    eprintln!("a pick with {KEYS} resting keys: {buffers} buffers, {} ms", plan[0]["Execution Time"]);
    assert!(buffers < 50, "a pick touched {buffers} buffers with {KEYS} resting keys: {plan:#}");
}

/// Messages gone from under a FIFO endpoint's log (a tenant's retention shorter
/// than the log's) are passed over with the batch they fell in, read in the same
/// snapshot as the batch, and what follows them goes. (Before, the position
/// moved to the log's end as a second statement read it, so a message committed
/// between the two was skipped; that window cannot be forced from outside, and
/// this test holds the path, not the race: one statement leaves no window.)
#[tokio::test]
async fn a_fifo_endpoint_whose_waiting_messages_are_gone_passes_over_only_them_and_sends_what_follows() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    let a = t.application().await;
    // Held back while it fills: the messages are gone before it sends.
    fifo(&t, &a, json!({"url": sink.url}), json!({"batchSize": 10, "maxWaitSecs": 2})).await;
    let gone = publish(&t, &a, 3).await;
    let db = app.db.client().await;
    db.execute("DELETE FROM messages WHERE id = ANY ($1)", &[&gone]).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kept = publish(&t, &a, 2).await;
    let got = sink.wait_for(1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ids(&sink.received()), kept, "only what followed the gone messages: {:?}", ids(&got));
}

/// A seek (or a poll's `after`) never passes a message logged after its time.
/// Log order is the order in which transactions took their ids, at their first
/// write; a row's time is its transaction's start. A transaction that began
/// before the seek's time and wrote after a later message is made here by hand
/// (it logs the first message again, as a publish that began early and wrote
/// late would log its own): before, the seek went to the last row logged at or
/// before its time, that late-written row, and the later message was skipped.
#[tokio::test]
async fn a_seek_never_passes_a_message_logged_after_its_time_though_an_earlier_transaction_wrote_later() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let sink =
        t.post(&format!("/api/v1/app/{a}/destination"), json!({"type": "pollingEndpoint", "config": {}}), 201).await;
    let sink = sink["id"].as_str().unwrap().to_owned();
    let first = t.message(&a, "x", json!({"n": 0})).await["id"].as_str().unwrap().to_owned();
    let mut early = app.db.client().await;
    let early = early.transaction().await.unwrap();
    let began: chrono::DateTime<chrono::Utc> = early.query_one("SELECT now()", &[]).await.unwrap().get(0);
    let after = began + chrono::Duration::milliseconds(200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = t.message(&a, "x", json!({"n": 1})).await["id"].as_str().unwrap().to_owned();
    early
        .execute(
            "INSERT INTO sink_log (tenant_id, app_id, endpoint_id, key, msg_id) VALUES ($1, $2, $3, '', $4)",
            &[&t.id, &a, &sink, &first],
        )
        .await
        .unwrap();
    early.commit().await.unwrap();
    let after = after.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let seek = t.post(&format!("/api/v1/app/{a}/poller/{sink}/consumer/c/seek"), json!({ "after": after }), 200).await;
    assert!(seek["iterator"].is_string(), "{seek}");
    let read = t.get(&format!("/api/v1/app/{a}/poller/{sink}/consumer/c")).await;
    let read: Vec<&str> = read["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(read.contains(&later.as_str()), "the seek passed a message logged after its time: read {read:?}");
    let polled = t
        .req(Method::GET, &format!("/api/v1/app/{a}/poller/{sink}"))
        .query(&[("after", after.as_str())])
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let polled: Vec<&str> = polled["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(polled.contains(&later.as_str()), "a poll after that time passed it: read {polled:?}");
}

/// The upgrade lays to rest the FIFO rows the release before left drained and
/// due (so they do not each take a turn ahead of real work), and leaves alone a
/// row with messages waiting, one with a batch held, and one a runner holds.
#[tokio::test]
async fn the_upgrade_lays_drained_fifo_rows_to_rest_and_leaves_rows_with_work_alone() {
    use hookgate_shared::migrate::{self, Switch};
    let db = hookgate_tests::TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0035"), Switch::Apply).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO tenants (id, name) VALUES ('tnt_a', 'a');
             INSERT INTO applications (tenant_id, id, name) VALUES ('tnt_a', 'app_a', 'a');
             INSERT INTO endpoints (tenant_id, app_id, id, url, secret, kind, fifo_key, destination)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'http://127.0.0.1:9/', '\\x00', 7, '{k}', '\\x00');
             -- As the release before leaves them: drained a while ago (due), one
             -- with a message past its position, one with a batch held, one held.
             INSERT INTO sink_log (tenant_id, app_id, endpoint_id, key, msg_id)
                 SELECT 'tnt_a', 'app_a', 'ep_a', k, 'msg_' || k FROM unnest(ARRAY['drained', 'waiting', 'held']) k;
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key, next_at)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'waiting', now() - interval '1 minute');
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key, pos_xid, pos_seq, next_at)
                 SELECT tenant_id, app_id, endpoint_id, key, xid, seq, now() - interval '1 minute' FROM sink_log
                 WHERE key IN ('drained', 'held');
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key, batch_xid, batch_seq, next_at)
                 SELECT tenant_id, app_id, endpoint_id, 'retrying', xid, seq, now() + interval '5 minutes'
                 FROM sink_log WHERE key = 'waiting';
             UPDATE fifo_state SET lease_until = now() + interval '1 minute', lease_token = 7 WHERE key = 'held';",
        )
        .await
        .unwrap();
    migrate::run(&mut client, Switch::Apply).await.unwrap();
    let rows = client.query("SELECT key, next_at = 'infinity' FROM fifo_state ORDER BY key", &[]).await.unwrap();
    let rows: Vec<(String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected = [("drained", true), ("held", false), ("retrying", false), ("waiting", false)];
    assert_eq!(rows, expected.map(|(k, b)| (k.to_owned(), b)).to_vec());
}

/// Polls `sql` (one boolean, `$1` the endpoint id) until it holds, or panics
/// naming `what` after `within`.
async fn until(db: &tokio_postgres::Client, sql: &str, ep: &str, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while !db.query_one(sql, &[&ep]).await.unwrap().get::<_, bool>(0) {
        assert!(Instant::now() < deadline, "{what}, within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A tenant enabled while a runner parks its FIFO endpoint gets the endpoint
/// going again. The interleaving the review found, forced: a batch waits for its
/// retry (due, or soon, and held by no runner), so the enable's wake passes it
/// over; the enable's transaction is held open after its wake (a trigger); the
/// retry falls due and a runner takes the row, finds the tenant still disabled
/// and parks it; then the enable commits. Before, the runner's park read the
/// tenant as disabled (the enable not yet committed) and left the row at rest,
/// its batch held, for good: nothing wakes such a row (the sweep is off here).
/// Now the park decision waits for the tenant's row, so it sees the enable.
#[tokio::test]
async fn a_tenant_enabled_while_a_runner_parks_its_fifo_endpoint_gets_the_endpoint_going_again() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "2".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
        env.insert("HOOKGATE_FIFO_SWEEP_SECS".into(), "0".into());
    })
    .await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 500, ..Behaviour::default() });
    let a = t.application().await;
    let ep = fifo(&t, &a, json!({"url": sink.url}), json!({})).await;
    let sent = publish(&t, &a, 1).await;
    sink.wait_for(1, Duration::from_secs(10)).await;
    let db = app.db.client().await;
    let waiting = "SELECT bool_and(batch_xid IS NOT NULL AND lease_token IS NULL AND next_at > now())
                   FROM fifo_state WHERE endpoint_id = $1";
    until(&db, waiting, &ep, Duration::from_secs(5), "the failed batch waits for its retry").await;
    let path = format!("/admin/v1/tenant/{}", t.id);
    let res = app.admin(Method::PATCH, &path).json(&json!({"disabled": true})).send().await.unwrap();
    assert_eq!(res.status(), 200);
    sink.set(Behaviour::default());
    // The enabling transaction marks itself (a transaction-local setting) when it
    // enables the tenant; its statements on fifo_state (the wake) then sleep 4 s.
    db.batch_execute(
        "CREATE FUNCTION enabling() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF OLD.disabled AND NOT NEW.disabled THEN PERFORM set_config('test.enabling', 'on', true); END IF;
         RETURN NEW; END $$;
         CREATE TRIGGER enabling AFTER UPDATE ON tenants FOR EACH ROW EXECUTE FUNCTION enabling();
         CREATE FUNCTION held_open() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF current_setting('test.enabling', true) = 'on' THEN PERFORM pg_sleep(4); END IF; RETURN NULL; END $$;
         CREATE TRIGGER held_open AFTER UPDATE ON fifo_state FOR EACH STATEMENT EXECUTE FUNCTION held_open();",
    )
    .await
    .unwrap();
    let enabling = tokio::spawn(app.admin(Method::PATCH, &path).json(&json!({"disabled": false})).send());
    // While the enable is held open, the retry falls due and a runner takes the row.
    let taken =
        "SELECT bool_and(lease_token IS NOT NULL OR next_at = 'infinity') FROM fifo_state WHERE endpoint_id = $1";
    until(&db, taken, &ep, Duration::from_secs(4), "a runner takes the row").await;
    assert!(!enabling.is_finished(), "the runner took the row only after the enable: the race was not forced");
    assert_eq!(enabling.await.unwrap().unwrap().status(), 200);
    db.batch_execute("DROP TRIGGER held_open ON fifo_state; DROP TRIGGER enabling ON tenants").await.unwrap();
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(ids(&got[1..]), sent, "the held batch went again once the tenant was enabled");
}

/// A FIFO endpoint, or a tenant, enabled by a process of the previous release
/// (which wakes no parked row: a rolling upgrade) is found by the workers' sweep
/// and catches up. Before, nothing woke its parked rows.
#[tokio::test]
async fn a_fifo_endpoint_or_tenant_enabled_without_a_wake_is_found_by_the_sweep_and_catches_up() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_FIFO_SWEEP_SECS".into(), "1".into());
    })
    .await;
    let db = app.db.client().await;
    for tenant_wide in [false, true] {
        let t = app.tenant().await;
        let sink = Sink::start().await;
        let a = t.application().await;
        // Held back while it fills: the endpoint or tenant is disabled before it goes.
        let ep = fifo(&t, &a, json!({"url": sink.url}), json!({"batchSize": 10, "maxWaitSecs": 2})).await;
        let sent = publish(&t, &a, 3).await;
        let res = match tenant_wide {
            true => app.admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id)).json(&json!({"disabled": true})),
            false => t
                .req(Method::PATCH, &format!("/api/v1/app/{a}/destination/{ep}"))
                .json(&json!({"type": "fifoEndpoint", "config": {}, "status": "disabled"})),
        };
        assert_eq!(res.send().await.unwrap().status(), 200);
        let parked =
            "SELECT bool_and(next_at = 'infinity' AND lease_token IS NULL) FROM fifo_state WHERE endpoint_id = $1";
        until(&db, parked, &ep, Duration::from_secs(10), "the endpoint is parked").await;
        assert!(sink.received().is_empty(), "a parked endpoint was sent its batch");
        // Enabled as the previous release does it: the row alone, no wake.
        match tenant_wide {
            true => db.execute("UPDATE tenants SET disabled = false WHERE id = $1", &[&t.id]).await.unwrap(),
            false => db.execute("UPDATE endpoints SET disabled = false WHERE id = $1", &[&ep]).await.unwrap(),
        };
        let got = sink.wait_for(1, Duration::from_secs(10)).await;
        assert_eq!(
            ids(&got),
            sent,
            "the {} enabled without a wake caught up",
            if tenant_wide { "tenant" } else { "endpoint" }
        );
    }
}

/// A parked FIFO endpoint stays parked while messages are published to it: each
/// is logged, and no row is woken (before, every publish woke the row of its key
/// for a whole turn, which read its batch and parked it again: 3 writes of the
/// row a publish). Enabled, every key catches up, in order.
#[tokio::test]
async fn publishing_to_a_disabled_keyed_fifo_endpoint_logs_its_messages_and_wakes_none_of_its_parked_rows() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let sink = Sink::start().await;
    let a = t.application().await;
    let ep = fifo(&t, &a, json!({"url": sink.url, "key": "k"}), json!({})).await;
    let patch = |status: &str| {
        t.req(Method::PATCH, &format!("/api/v1/app/{a}/destination/{ep}"))
            .json(&json!({"type": "fifoEndpoint", "config": {}, "status": status}))
            .send()
    };
    assert_eq!(patch("disabled").await.unwrap().status(), 200);
    let mut sent: Vec<(String, String)> = Vec::new();
    let send = |k: usize| {
        let (t, a) = (&t, &a);
        async move {
            let payload = json!({ "k": format!("key-{k}") });
            (format!("key-{k}"), t.message(a, "x", payload).await["id"].as_str().unwrap().to_owned())
        }
    };
    // A key's first message makes its row, which takes one turn and is parked.
    for k in 0..3 {
        sent.push(send(k).await);
    }
    let db = app.db.client().await;
    // (The endpoint's unkeyed row, made with it, rests: nothing is logged under it.)
    let parked =
        "SELECT count(*) FILTER (WHERE key <> '') = 3 AND bool_and(next_at = 'infinity' AND lease_token IS NULL)
                  FROM fifo_state WHERE endpoint_id = $1";
    until(&db, parked, &ep, Duration::from_secs(10), "each key's row is parked").await;
    db.batch_execute(
        "CREATE TABLE fifo_writes (at timestamptz DEFAULT now());
         CREATE FUNCTION count_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO fifo_writes DEFAULT VALUES; RETURN NULL; END $$;
         CREATE TRIGGER count_write AFTER UPDATE ON fifo_state FOR EACH ROW EXECUTE FUNCTION count_write();",
    )
    .await
    .unwrap();
    for i in 0..12 {
        sent.push(send(i % 3).await);
    }
    // Two of the runners' idle polls.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let writes: i64 = db.query_one("SELECT count(*) FROM fifo_writes", &[]).await.unwrap().get(0);
    assert_eq!(writes, 0, "12 publishes to a parked endpoint wrote its rows {writes} times");
    let logged: i64 =
        db.query_one("SELECT count(*) FROM sink_log WHERE endpoint_id = $1", &[&ep]).await.unwrap().get(0);
    assert_eq!(logged, 15, "every message is logged");
    assert_eq!(patch("enabled").await.unwrap().status(), 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        let got: Vec<(String, String)> = sink
            .received()
            .iter()
            .flat_map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap();
                let data = body["data"].as_array().unwrap().clone();
                data.into_iter()
                    .map(|m| (m["payload"]["k"].as_str().unwrap().to_owned(), m["id"].as_str().unwrap().to_owned()))
            })
            .collect();
        if got.len() >= sent.len() || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for k in 0..3 {
        let key = format!("key-{k}");
        let of = |v: &[(String, String)]| {
            v.iter().filter(|(kk, _)| *kk == key).map(|(_, id)| id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(of(&got), of(&sent), "{key}'s messages once each, in order, once enabled");
    }
}

/// Migration 0036 locks the FIFO rows it may lay to rest in key order, the order
/// in which a publish locks a keyed endpoint's rows, so the two cannot deadlock on
/// a live database. A publish holding key `a` and about to lock `b` meets the
/// migration: before, the migration locked in the table's order (`b`, then waited
/// for `a`), and one of the two failed with a deadlock.
#[tokio::test]
async fn the_upgrade_locks_fifo_rows_in_the_order_a_publish_does_so_the_two_cannot_deadlock() {
    use hookgate_shared::migrate::{self, Switch};
    let db = hookgate_tests::TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0035"), Switch::Apply).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO tenants (id, name) VALUES ('tnt_a', 'a');
             INSERT INTO applications (tenant_id, id, name) VALUES ('tnt_a', 'app_a', 'a');
             INSERT INTO endpoints (tenant_id, app_id, id, url, secret, kind, fifo_key, destination)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'http://127.0.0.1:9/', '\\x00', 7, '{k}', '\\x00');
             -- In the table, `b` comes before `a`.
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key) VALUES ('tnt_a', 'app_a', 'ep_a', 'b');
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key) VALUES ('tnt_a', 'app_a', 'ep_a', 'a');",
        )
        .await
        .unwrap();
    let lock = |k: &str| format!("SELECT 1 FROM fifo_state WHERE key = '{k}' FOR UPDATE");
    let mut publishing = db.client().await;
    let publish = publishing.transaction().await.unwrap();
    publish.batch_execute(&lock("a")).await.unwrap();
    let migrating = tokio::spawn(async move { migrate::run(&mut client, Switch::Apply).await });
    let watch = db.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the migration waits for the publish's lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = publish.batch_execute(&lock("b")).await;
    let committed = match second {
        Ok(()) => publish.commit().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let migrated = migrating.await.unwrap().map(|_| ()).map_err(|e| e.to_string());
    assert_eq!((committed, migrated), (Ok(()), Ok(())), "the publish and the migration both went through");
}

/// Enabling a tenant wakes its parked FIFO rows locking them in key order, the
/// order a publish locks a keyed endpoint's rows: a publish holding key `a` and
/// about to lock `b` meets the wake. Before, the wake locked in the table's order
/// (`b`, then waited for `a`), and one of the two failed with a deadlock.
#[tokio::test]
async fn a_wake_locks_fifo_rows_in_the_order_a_publish_does_so_the_two_cannot_deadlock() {
    use hookgate_shared::{ids::TenantId, store::fifo};
    let db = hookgate_tests::TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute(
            "INSERT INTO tenants (id, name) VALUES ('tnt_a', 'a');
             INSERT INTO applications (tenant_id, id, name) VALUES ('tnt_a', 'app_a', 'a');
             INSERT INTO endpoints (tenant_id, app_id, id, url, secret, kind, fifo_key, destination)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'http://127.0.0.1:9/', '\\x00', 7, '{k}', '\\x00');
             -- In the table, `b` comes before `a`; both parked.
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key, next_at, parked)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'b', 'infinity', true);
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key, next_at, parked)
                 VALUES ('tnt_a', 'app_a', 'ep_a', 'a', 'infinity', true);",
        )
        .await
        .unwrap();
    let lock = |k: &str| format!("SELECT 1 FROM fifo_state WHERE key = '{k}' FOR UPDATE");
    let mut publishing = db.client().await;
    let publish = publishing.transaction().await.unwrap();
    publish.batch_execute(&lock("a")).await.unwrap();
    let waking = tokio::spawn(async move {
        fifo::wake_tenant(&client, &TenantId::from_db("tnt_a".into())).await.map_err(|e| e.to_string())
    });
    let watch = db.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the wake waits for the publish's lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = publish.batch_execute(&lock("b")).await;
    let committed = match second {
        Ok(()) => publish.commit().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let woke = waking.await.unwrap();
    assert_eq!((committed, woke), (Ok(()), Ok(2)), "the publish and the wake both went through");
}
