//! FIFO endpoints parked and woken: a tenant enabled while a runner parks its
//! endpoint, enables that ran no wake (the previous release's), publishes to a
//! parked endpoint, and the order wakes and the upgrade lock rows in.

use std::time::{Duration, Instant};

use hookgate_tests::{
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

use super::sinks::{fifo, ids, publish};

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
/// for `a`), and one of the two failed with a deadlock. (Its column is now added
/// under a lock that waits for the publish a second at a time, and its batches
/// pass over rows another transaction holds: it waits for no row.)
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

/// A long transaction on `fifo_state` (here one that locked a row and sits idle
/// for 4 s) does not hold every publish up behind the upgrade: 0036 waits a
/// second at most for its column's lock, lets the queue through, and tries again.
/// Before, its lock waited with no bound, and every publish queued behind it
/// until the long transaction and then the whole migration had ended.
#[tokio::test]
async fn a_long_transaction_on_fifo_rows_makes_the_upgrade_wait_not_every_publish() {
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
             INSERT INTO fifo_state (tenant_id, app_id, endpoint_id, key) VALUES ('tnt_a', 'app_a', 'ep_a', 'old');",
        )
        .await
        .unwrap();
    let long = db.client().await;
    long.batch_execute("BEGIN; SELECT 1 FROM fifo_state WHERE key = 'old' FOR UPDATE").await.unwrap();
    let ending = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(4)).await;
        long.batch_execute("COMMIT").await.unwrap();
    });
    let started = Instant::now();
    let migrating = tokio::spawn(async move { migrate::run(&mut client, Switch::Apply).await.map(|_| Instant::now()) });
    let publish =
        "INSERT INTO fifo_state AS f (tenant_id, app_id, endpoint_id, key) VALUES ('tnt_a', 'app_a', 'ep_a', 'new')
        ON CONFLICT (tenant_id, app_id, endpoint_id, key) DO UPDATE SET next_at = now() WHERE f.next_at > now()";
    let publisher = db.client().await;
    let mut slowest = Duration::ZERO;
    while !migrating.is_finished() {
        let one = Instant::now();
        publisher.batch_execute(publish).await.unwrap();
        slowest = slowest.max(one.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ending.await.unwrap();
    let done = migrating.await.unwrap().expect("the upgrade went through once the long transaction ended");
    assert!(done - started >= Duration::from_secs(4), "the upgrade waited for the long transaction");
    let parked: bool =
        publisher.query_one("SELECT parked FROM fifo_state WHERE key = 'old'", &[]).await.unwrap().get(0);
    assert!(!parked);
    assert!(slowest < Duration::from_millis(1800), "a publish waited {slowest:?} behind the upgrade's lock");
}
