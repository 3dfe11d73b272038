//! Postgres failover under mixed load, as an operator runs it: a primary with a
//! synchronous standby, both hosts in one `DATABASE_URL`
//! (`target_session_attrs=read-write`), the primary killed (`pg_ctl stop -m
//! immediate`) while API messages (retried under their `Idempotency-Key`),
//! Stripe-signed events (each sent twice, retried by the sender), a FIFO
//! destination and a replay task all run, and the standby promoted. Three times
//! over, a new standby taking the dead primary's place each time. Afterwards:
//! each event admitted once, every acknowledged message delivered to both
//! destinations, nothing extra, the replay finished, and service back soon after
//! each promotion (measured: docs/performance.md).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use hookgate_tests::{
    app::default_env,
    db::connect,
    process::{hookgate, Served},
    providers,
    redis_cluster::Blackhole,
    servers::PgServer,
    sink::Sink,
    TestApp, TestDb,
};
use serde_json::{json, Value};

const ROUNDS: usize = 3;
/// API messages per round, each under its own `Idempotency-Key`.
const MESSAGES: usize = 40;
/// Provider events per round, each sent twice.
const EVENTS: usize = 25;
/// Events per round to a source in sync mode (forwarded before the answer),
/// each sent twice.
const SYNC_EVENTS: usize = 10;
/// Messages made before the first round, replayed by a task running across it.
const PRELOAD: usize = 150;
const SECRET: &str = "whsec_failover_test_secret";
/// The bound the issue sets on a stop: service back within this of the promotion.
const BACK_WITHIN: Duration = Duration::from_secs(30);

/// Sends until a 2xx, from instance `first` on, for at most `patience`; the
/// answer's body, or `None`. Every other answer is retried, as a sender or an SDK
/// with a retry policy would (a 409 for a key whose first try is still held too).
async fn until_2xx(
    http: &reqwest::Client,
    bases: &[String],
    first: usize,
    patience: Duration,
    request: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
) -> Option<Value> {
    let deadline = Instant::now() + patience;
    for attempt in 0.. {
        let base = &bases[(first + attempt) % bases.len()];
        if let Ok(res) = request(http, base).send().await {
            if res.status().is_success() {
                return Some(res.json().await.unwrap_or(Value::Null));
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

/// The URL naming both hosts, the writable one chosen at each connection.
fn both(ports: [u16; 2]) -> String {
    format!(
        "postgres://hookgate@127.0.0.1:{},127.0.0.1:{}/hookgate?target_session_attrs=read-write",
        ports[0], ports[1]
    )
}

fn message(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    app: &str,
    idempotency: &str,
    event_type: &str,
) -> reqwest::RequestBuilder {
    http.post(format!("{base}/api/v1/app/{app}/msg"))
        .bearer_auth(key)
        .header("Idempotency-Key", idempotency)
        .json(&json!({"eventType": event_type, "payload": {"key": idempotency}}))
}

/// Holds the insert of a message of type `failover.held` (within the statement
/// timeout, so that only the primary's death ends it).
/// Installed before any load (the trigger's lock would deadlock with it), and
/// let go after the promotion by emptying `holding`.
const HOLD: &str = "CREATE TABLE holding (on_ boolean); INSERT INTO holding VALUES (true);
    CREATE FUNCTION held() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.event_type = 'failover.held' AND EXISTS (SELECT 1 FROM holding) THEN PERFORM pg_sleep(1.8); END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER held BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION held()";

fn p50(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::test]
async fn a_promoted_standby_takes_over_every_path_with_nothing_lost_or_admitted_twice() {
    let first = PgServer::start();
    let second = first.standby();
    first.make_synchronous();
    let ports = [first.port, second.port];
    let mut nodes = [Some(first), Some(second)];
    let mut primary = 0;
    let url = both(ports);

    let db = TestDb::on("failover", &url);
    let mut env = default_env(&db);
    for (k, v) in [
        ("HOOKGATE_DB_TIMEOUT_MS", "1000"),
        ("HOOKGATE_DB_STATEMENT_TIMEOUT_MS", "2000"),
        ("HOOKGATE_EGRESS_TIMEOUT_SECS", "2"),
        ("HOOKGATE_DELIVERY_LEASE_SECS", "4"),
        ("HOOKGATE_RETRY_SCHEDULE", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"),
        ("HOOKGATE_WORKER_POLL_MS", "200"),
        // One message per step: the replay is still running when the primary dies.
        ("HOOKGATE_REPLAY_BATCH", "1"),
        // Maintenance and pruning every second, to see them resume on the new primary.
        ("HOOKGATE_PRUNE_INTERVAL_SECS", "1"),
    ] {
        env.insert(k.into(), v.into());
    }
    let out = hookgate(&[("DATABASE_URL", &url), ("HOOKGATE_MASTER_KEY", &env["HOOKGATE_MASTER_KEY"])])
        .arg("migrate")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
    let procs = [Served::start(&env, "all").await, Served::start(&env, "all").await];
    let bases: Arc<Vec<String>> = Arc::new(procs.iter().map(|p| p.url("")).collect());
    let admin =
        TestApp { base: bases[0].clone(), port: procs[0].port, metrics_port: 0, db, http: reqwest::Client::new(), env };
    let t = admin.tenant().await;
    let (plain, ordered) = (Sink::start().await, Sink::start().await);
    let a = t.application().await;
    let ep = t.endpoint(&a, &plain.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let body = json!({"type": "fifoEndpoint", "config": {"url": ordered.url}, "batchSize": 5});
    t.post(&format!("/api/v1/app/{a}/destination"), body, 201).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a});
    let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    // A source in sync mode, forwarding to an application of its own.
    let forwarded = Sink::start().await;
    let b = t.application().await;
    t.endpoint(&b, &forwarded.url, json!({})).await;
    let body = json!({"name": "s2", "provider": "stripe", "secret": SECRET, "appId": b, "mode": "sync"});
    let sync_src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let key = t.key.clone();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();

    nodes[primary].as_ref().unwrap().sql(HOLD);
    let since = chrono::Utc::now() - chrono::Duration::minutes(5);
    let mut preloaded = Vec::new();
    for m in 0..PRELOAD {
        preloaded.push(t.message(&a, "failover.pre", json!({"m": m})).await["id"].as_str().unwrap().to_owned());
    }
    plain.wait_for(PRELOAD, Duration::from_secs(60)).await;

    let mut answers = Vec::new();
    let (mut backs, mut readies, mut unready_seen) = (Vec::new(), Vec::new(), Vec::new());
    let mut replay = None;
    for round in 0..ROUNDS {
        let mut tasks = Vec::new();
        for m in 0..MESSAGES {
            let (http, bases, a, key) = (http.clone(), bases.clone(), a.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis((m * 100) as u64)).await;
                let idem = format!("r{round}m{m}");
                let sent = until_2xx(&http, &bases, m, Duration::from_secs(120), |h, base| {
                    message(h, base, &key, &a, &idem, "failover.api")
                })
                .await;
                ("msg", format!("{round}/{m}"), sent)
            }));
        }
        for e in 0..EVENTS {
            for copy in 0..2 {
                let (http, bases, src) = (http.clone(), bases.clone(), src.clone());
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis((e * 160 + copy * 70) as u64)).await;
                    let event = format!(r#"{{"id": "evt_r{round}_{e}", "type": "failover.in"}}"#);
                    let sent = until_2xx(&http, &bases, e + copy, Duration::from_secs(120), |h, base| {
                        providers::stripe_post(h, &format!("{base}/in/{src}"), SECRET, &event)
                    })
                    .await;
                    ("in", format!("{round}/{e}"), sent)
                }));
            }
        }
        for e in 0..SYNC_EVENTS {
            for copy in 0..2 {
                let (http, bases, src) = (http.clone(), bases.clone(), sync_src.clone());
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis((e * 350 + copy * 90) as u64)).await;
                    let event = format!(r#"{{"id": "evt_sync_r{round}_{e}", "type": "failover.sync"}}"#);
                    let sent = until_2xx(&http, &bases, e + copy, Duration::from_secs(120), |h, base| {
                        providers::stripe_post(h, &format!("{base}/in/{src}"), SECRET, &event)
                    })
                    .await;
                    ("sync", format!("{round}/{e}"), sent)
                }));
            }
        }
        let mut held = None;
        if round == 0 {
            let path = format!("/api/v1/app/{a}/endpoint/{ep}/bulk-replay");
            replay = Some(t.post(&path, json!({ "since": since }), 202).await["id"].as_str().unwrap().to_owned());
            // One request is held inside its insert when the primary dies: its key
            // was claimed (and the claim replicated), its message was not made.
            let (http, bases, a, key) = (http.clone(), bases.clone(), a.clone(), key.clone());
            held = Some(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(800)).await;
                let sent = until_2xx(&http, &bases, 0, Duration::from_secs(120), |h, base| {
                    message(h, base, &key, &a, "held", "failover.held")
                })
                .await;
                (Instant::now(), sent)
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if let Some(task) = replay.as_ref().filter(|_| round == 0) {
            let now = t.get(&format!("/api/v1/background-task/{task}")).await;
            assert_eq!(now["status"], "running", "the replay runs when the primary dies: {now}");
        }

        // The primary dies. Until the standby is promoted, no server takes writes.
        nodes[primary].as_ref().unwrap().stop();
        let died = Instant::now();
        let mut unready = 0;
        while died.elapsed() < Duration::from_millis(2000) {
            if let Ok(res) = http.get(format!("{}/readyz", bases[round % 2])).send().await {
                unready += usize::from(res.status() == 503);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        unready_seen.push(unready);
        let standby = 1 - primary;
        nodes[standby].as_ref().unwrap().promote();
        let promoted = Instant::now();
        if round == 0 {
            // The held request's retries are not held again.
            nodes[standby].as_ref().unwrap().sql("DELETE FROM holding");
        }
        let probe = format!("probe{round}");
        let back = until_2xx(&http, &bases, round, BACK_WITHIN, |h, base| {
            message(h, base, &key, &a, &probe, "failover.probe")
        })
        .await;
        let back_after = promoted.elapsed();
        assert!(back.is_some(), "round {round}: no message accepted within {BACK_WITHIN:?} of the promotion");
        answers.push(("probe", format!("{round}"), back));
        loop {
            let ready = http.get(format!("{}/readyz", bases[(round + 1) % 2])).send().await;
            if ready.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(promoted.elapsed() < BACK_WITHIN, "round {round}: never ready again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        readies.push(promoted.elapsed().as_secs_f64());
        if let Some(held) = held {
            let (at, sent) = held.await.unwrap();
            assert!(sent.is_some(), "the held request's retries were never answered 2xx");
            let after = at.saturating_duration_since(promoted);
            eprintln!(
                "failover: the request held when the primary died answered 2xx {:.2} s after the promotion",
                after.as_secs_f64()
            );
            assert!(after < BACK_WITHIN, "the held request's key stayed claimed {after:?} after the promotion");
            answers.push(("probe", "held".into(), sent));
        }

        backs.push(back_after.as_secs_f64());
        eprintln!(
            "failover round {round}: down {:.2} s before the promotion, accepting {:.2} s after it, ready {:.2} s after it",
            (promoted - died).as_secs_f64(),
            back_after.as_secs_f64(),
            readies[round]
        );

        // A new standby where the dead primary was, synchronous: the next round's.
        nodes[primary] = None;
        nodes[primary] = Some(nodes[standby].as_ref().unwrap().standby_on(ports[primary]));
        nodes[standby].as_ref().unwrap().make_synchronous();
        primary = standby;
        for task in tasks {
            answers.push(task.await.unwrap());
        }
    }

    // What the senders were told.
    let mut admitted: HashMap<String, HashSet<String>> = HashMap::new();
    let mut accepted = HashSet::new();
    let mut unanswered = Vec::new();
    for (kind, n, sent) in &answers {
        match (*kind, sent) {
            ("in" | "sync", Some(v)) => {
                admitted
                    .entry(format!("{kind} {n}"))
                    .or_default()
                    .insert(v["eventId"].as_str().unwrap_or_default().to_owned());
            }
            ("msg" | "probe", Some(v)) => {
                accepted.insert(v["id"].as_str().unwrap().to_owned());
            }
            _ => unanswered.push(format!("{kind} {n}")),
        }
    }
    assert!(unanswered.is_empty(), "never answered 2xx: {unanswered:?}");
    let doubled: Vec<_> = admitted.iter().filter(|(_, ids)| ids.len() != 1).collect();
    assert!(doubled.is_empty(), "copies of one event answered as different events: {doubled:?}");

    // What Postgres holds: each event once, each key's message once.
    let pg = connect(&url).await;
    let ids = |sql: &'static str| {
        let pg = &pg;
        async move { pg.query(sql, &[]).await.unwrap().iter().map(|r| r.get::<_, String>(0)).collect::<HashSet<_>>() }
    };
    let events = ids("SELECT id FROM inbound_events").await;
    assert_eq!(events.len(), ROUNDS * (EVENTS + SYNC_EVENTS), "each event admitted once");
    let told: HashSet<String> = admitted.values().flatten().cloned().collect();
    assert!(told.is_subset(&events), "every event answered 2xx is in Postgres");
    let api =
        ids("SELECT id FROM messages WHERE event_type IN ('failover.api', 'failover.probe', 'failover.held')").await;
    assert_eq!(api.len(), ROUNDS * (MESSAGES + 1) + 1, "one message per Idempotency-Key");
    assert!(accepted.is_subset(&api), "every message answered 2xx is in Postgres");
    let messages: HashSet<String> =
        pg.query("SELECT id FROM messages WHERE app_id = $1", &[&a]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(messages.len(), PRELOAD + ROUNDS * (MESSAGES + 1 + EVENTS) + 1, "one message per admitted event");

    // Every message delivered to both destinations; nothing that is not a message.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let to_plain: HashSet<String> =
            plain.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
        let to_ordered: HashSet<String> = ordered
            .received()
            .iter()
            .flat_map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap();
                body["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["id"].as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        let task = t.get(&format!("/api/v1/background-task/{}", replay.as_ref().unwrap())).await;
        let unsettled: i64 =
            pg.query_one("SELECT count(*) FROM deliveries WHERE status <> 0", &[]).await.unwrap().get(0);
        assert!(to_plain.is_subset(&messages) && to_ordered.is_subset(&messages), "nothing but messages is sent");
        if to_plain == messages && to_ordered == messages && unsettled == 0 && task["status"] == "finished" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the failovers: {} and {} of {} delivered, {unsettled} unsettled, replay {task}",
            to_plain.len(),
            to_ordered.len(),
            messages.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut times: HashMap<String, usize> = HashMap::new();
    for r in plain.received() {
        *times.entry(r.header("webhook-id").unwrap().to_owned()).or_default() += 1;
    }
    let forwarded: HashSet<String> = forwarded
        .received()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok()?["id"].as_str().map(str::to_owned))
        .collect();
    let sync_sent: HashSet<String> =
        (0..ROUNDS).flat_map(|r| (0..SYNC_EVENTS).map(move |e| format!("evt_sync_r{r}_{e}"))).collect();
    assert_eq!(forwarded, sync_sent, "every sync-mode event was forwarded before it was answered");
    let short: Vec<_> = preloaded.iter().filter(|id| times[*id] < 2).collect();
    assert!(short.is_empty(), "every preloaded message replayed: {} were not", short.len());
    assert!(
        unready_seen.iter().all(|n| *n > 0),
        "/readyz said not ready while no server took writes, in every round: {unready_seen:?}"
    );

    // Maintenance resumed on the last primary: an expired key is pruned, and the
    // partition furthest ahead, dropped, is made again.
    pg.execute(
        "INSERT INTO idempotency_keys (tenant_id, key, fingerprint, state, created_at)
         VALUES ('expired', 'expired', '\\x00', 'done', now() - interval '30 days')",
        &[],
    )
    .await
    .unwrap();
    // The partitions that start after today hold no row yet; the one holding the
    // day ahead that maintenance keeps made must come back.
    const AHEAD: &str = "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'inbound_events'::regclass
          AND c.relname::text > 'inbound_events_p' || to_char(now(), 'YYYYMMDD')";
    let ahead: Vec<String> = pg.query(AHEAD, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert!(!ahead.is_empty(), "partitions are made ahead");
    for part in &ahead {
        pg.batch_execute(&format!("DROP TABLE {part}")).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = pg
            .query_one(
                &format!(
                    "SELECT (SELECT count(*) FROM idempotency_keys WHERE tenant_id = 'expired'),
                                 (SELECT count(*) FROM ({AHEAD}) a)"
                ),
                &[],
            )
            .await
            .unwrap();
        let (expired, remade): (i64, i64) = (row.get(0), row.get(1));
        if expired == 0 && remade >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "maintenance after the failovers: {expired} expired keys, {remade} partitions ahead"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "failover: {ROUNDS} promotions; accepting again p50 {:.2} s, worst {:.2} s; ready again p50 {:.2} s, worst {:.2} s",
        p50(backs.clone()),
        backs.iter().cloned().fold(0.0, f64::max),
        p50(readies.clone()),
        readies.iter().cloned().fold(0.0, f64::max),
    );
}

/// Polls `check` every 100 ms for up to `within`; how long it took.
async fn within(within: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < within, "never within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

/// A host listed first that takes connections and never answers (a stopped
/// server, a machine frozen behind a kernel that still answers): each host gets
/// its own bound, so the second is reached. Before, the first held every
/// connection until the pool gave up, and the second was never tried.
#[tokio::test]
async fn a_first_host_that_takes_connections_and_never_answers_does_not_keep_the_second_from_serving() {
    let pg = PgServer::start();
    let silent = Blackhole::start();
    let app = TestApp::spawn_on_server(&pg, "hookgate", |env| {
        env.insert(
            "DATABASE_URL".into(),
            format!("postgres://hookgate@127.0.0.1:{},127.0.0.1:{}/hookgate", silent.port, pg.port),
        );
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "200".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let sink = Sink::start().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    for n in 0..5 {
        t.message(&a, "hosts.test", json!({ "n": n })).await;
    }
    sink.wait_for(5, Duration::from_secs(30)).await;
    let ready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
}

/// The primary stops answering but keeps its connections open (SIGSTOP: its
/// kernel still acknowledges), and the standby is promoted: the connections that
/// waited on the stopped primary are checked and replaced, new ones go to the
/// promoted standby, and service is back well within the bound.
#[tokio::test]
async fn a_primary_that_stops_answering_with_its_connections_open_is_passed_over_for_the_promoted_standby() {
    let primary = PgServer::start();
    let standby = primary.standby();
    primary.make_synchronous();
    let url = both([primary.port, standby.port]);
    let app = TestApp::spawn_on_server(&primary, "hookgate", |env| {
        env.insert("DATABASE_URL".into(), url.clone());
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "2000".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "200".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "4".into());
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "2".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let sink = Sink::start().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    // Every pooled connection in use once, so that each is open to the primary.
    let mut sent = HashSet::new();
    for n in 0..20 {
        sent.insert(t.message(&a, "stall.test", json!({ "n": n })).await["id"].as_str().unwrap().to_owned());
    }
    sink.wait_for(20, Duration::from_secs(30)).await;

    primary.pause();
    tokio::time::sleep(Duration::from_secs(1)).await;
    standby.promote();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let bases = [app.base.clone()];
    let (key, app_id) = (t.key.clone(), a.clone());
    // Ready first, before any request has found the new primary for it.
    let ready = within(BACK_WITHIN, "ready", async || {
        http.get(format!("{}/readyz", bases[0])).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    let took = within(BACK_WITHIN, "a message accepted after the promotion", async || {
        let res = message(&http, &bases[0], &key, &app_id, "after-stall", "stall.test").send().await;
        match res {
            Ok(r) if r.status().is_success() => {
                sent.insert(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
                true
            }
            _ => false,
        }
    })
    .await;
    eprintln!(
        "failover from a stopped primary: ready {:.2} s after the promotion, then accepting {:.2} s later",
        ready.as_secs_f64(),
        took.as_secs_f64()
    );
    within(BACK_WITHIN, "every message delivered", async || {
        let got: HashSet<String> =
            sink.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
        sent.is_subset(&got)
    })
    .await;
}
