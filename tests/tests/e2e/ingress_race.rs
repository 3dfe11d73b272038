//! The race: 1,000 distinct events, each sent 5 times concurrently, spread over 3
//! Hookgate processes sharing one Postgres and Redis, under faults in the middle.
//! Every run: exactly 1,000 events admitted, every copy answered 200 (retried
//! until it was), each event delivered at least once and recorded once. Where
//! Redis fails over (Sentinel, Cluster), API messages through a throttled
//! endpoint run beside it, and no key is left without an expiry.

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use hookgate_gateway::Role;
use hookgate_tests::{
    app::default_env,
    process::Served,
    providers,
    redis_cluster::{keys_without_expiry, RedisCluster, RedisSentinel, SENTINEL_MASTER},
    servers::RedisServer,
    sink::Sink,
    TestApp, TestDb,
};
use serde_json::json;
use tokio::sync::Semaphore;

const EVENTS: usize = 1000;
const COPIES: usize = 5;
const SECRET: &str = "whsec_race";
/// API messages sent during a race whose Redis fails over.
const API_MESSAGES: usize = 200;

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    FlushRedis,
    StopRedis,
    KillProcess,
    /// On a Redis Cluster: SIGKILL one master; its replica takes over.
    KillClusterMaster,
    /// Under Redis Sentinel: SIGKILL the master; the Sentinel promotes the replica.
    KillSentinelMaster,
}

/// What the race runs against: one Redis, or a Redis Cluster.
enum Backing {
    Single(RedisServer),
    Cluster(RedisCluster),
    Sentinel(RedisSentinel),
}

async fn race(fault: Fault) {
    race_on(Backing::Single(RedisServer::start()), fault).await;
}

async fn race_on(mut redis: Backing, fault: Fault) {
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    match &redis {
        Backing::Single(r) => {
            env.insert("REDIS_URL".into(), r.url());
        }
        Backing::Cluster(c) => {
            env.insert("REDIS_URL".into(), c.url());
            env.insert("HOOKGATE_REDIS_CLUSTER".into(), "true".into());
        }
        Backing::Sentinel(s) => {
            env.insert("REDIS_URL".into(), s.url());
            env.insert("HOOKGATE_REDIS_SENTINEL_MASTER".into(), SENTINEL_MASTER.into());
        }
    }
    env.insert("HOOKGATE_WORKER_POLL_MS".into(), "200".into());
    env.insert("HOOKGATE_DB_POOL_SIZE".into(), "24".into());
    let api = TestApp::spawn_role(db.clone(), env.clone(), Role::Api).await;
    let sink = Sink::start().await;
    let t = api.tenant().await;
    let app = t.application().await;
    t.endpoint(&app, &sink.url, json!({})).await;
    let source =
        t.post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": app}), 201).await;
    let path = format!("/in/{}", source["id"].as_str().unwrap());
    // With a Redis that fails over: API messages too, to a throttled endpoint
    // (its spacing is kept in Redis), each retried under its eventId until accepted.
    let api_load = matches!(fault, Fault::KillClusterMaster | Fault::KillSentinelMaster);
    let throttled = Sink::start().await;
    let app2 = t.application().await;
    t.endpoint(&app2, &throttled.url, json!({"throttleRate": 100})).await;
    let mut api_tasks = Vec::new();
    for m in 0..if api_load { API_MESSAGES } else { 0 } {
        let (http, url, key, app2) = (api.http.clone(), api.url(""), t.key.clone(), app2.clone());
        api_tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(m as u64 * 40)).await;
            for _ in 0..400 {
                let res = http
                    .post(format!("{url}/api/v1/app/{app2}/msg"))
                    .bearer_auth(&key)
                    .json(&json!({"eventType": "race.api", "eventId": format!("api{m}"), "payload": {"m": m}}))
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status().is_success() || r.status() == 409 => return true,
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            false
        }));
    }

    let mut procs = Vec::new();
    for _ in 0..3 {
        procs.push(Served::start(&env, "all").await);
    }
    let urls: Arc<Vec<String>> = Arc::new(procs.iter().map(|p| p.url(&path)).collect());
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let non_200 = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(Semaphore::new(150));

    let mut copies = Vec::new();
    for e in 0..EVENTS {
        let body = format!(r#"{{"id":"evt_{e}","type":"race.test","data":{{"n":{e}}}}}"#);
        for c in 0..COPIES {
            copies.push((e, c, body.clone()));
        }
    }
    let mut tasks = Vec::new();
    for (e, c, body) in copies {
        let (urls, http, done, non_200, killed, gate) =
            (urls.clone(), http.clone(), done.clone(), non_200.clone(), killed.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let mut target = (e + c) % 3;
            for attempt in 0.. {
                assert!(attempt < 400, "a copy never got its 200");
                if killed.load(Ordering::Relaxed) && target == 0 {
                    target = 1;
                }
                let sig = providers::stripe(SECRET, providers::now(), body.as_bytes());
                let res = http
                    .post(&urls[target])
                    .header("content-type", "application/json")
                    .header("Stripe-Signature", sig)
                    .body(body.clone())
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status() == 200 => break,
                    Ok(r) => {
                        // 408: an overloaded server did not read the request in time.
                        assert!(
                            matches!(r.status().as_u16(), 408 | 409 | 503),
                            "only retryable answers: {}",
                            r.status()
                        );
                        non_200.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        non_200.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // The caller retries, on another instance.
                target = (target + 1) % 3;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            done.fetch_add(1, Ordering::Relaxed);
        }));
    }

    // The fault, in the middle of the run.
    while done.load(Ordering::Relaxed) < EVENTS * COPIES * 2 / 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match (fault, &mut redis) {
        (Fault::None, _) => {}
        (Fault::FlushRedis, Backing::Single(r)) => {
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", r.port)).unwrap();
            std::io::Write::write_all(&mut conn, b"FLUSHALL\r\n").unwrap();
        }
        (Fault::StopRedis, Backing::Single(r)) => r.stop(),
        (Fault::KillProcess, _) => {
            killed.store(true, Ordering::Relaxed);
            procs[0].kill().await;
        }
        (Fault::KillClusterMaster, Backing::Cluster(c)) => {
            let master = c.masters()[0];
            c.kill(master);
        }
        (Fault::KillSentinelMaster, Backing::Sentinel(s)) => {
            // Keys were written to the master before it died.
            assert!(s.count_keys(s.master_port, "*:in:*") > 0, "Redis was used before the failover");
            s.kill_master_and_wait_for_failover();
        }
        _ => panic!("this fault needs the other kind of Redis"),
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::Relaxed), EVENTS * COPIES, "every copy answered 200");
    for task in api_tasks {
        assert!(task.await.unwrap(), "an API message was never accepted");
    }

    let client = db.client().await;
    let admitted: i64 = client.query_one("SELECT count(*) FROM inbound_events", &[]).await.unwrap().get(0);
    assert_eq!(admitted, EVENTS as i64, "exactly one admitted per event");
    let messages: i64 =
        client.query_one("SELECT count(*) FROM messages WHERE app_id = $1", &[&app]).await.unwrap().get(0);
    assert_eq!(messages, EVENTS as i64, "recorded once: one message per event");

    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let ids: HashSet<String> =
            sink.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
        if ids.len() == EVENTS {
            break;
        }
        if std::time::Instant::now() >= deadline {
            // What the undelivered wait for: their rows and attempts say which path held them.
            let ids: Vec<String> = ids.into_iter().collect();
            let rows = client
                .query(
                    "SELECT d.msg_id || ' status=' || d.status || ' attempts=' || d.attempts
                        || ' next=' || COALESCE(d.next_attempt_at::text, '-')
                        || ' leased_until=' || COALESCE(d.leased_until::text, '-') || ' now=' || now()::text
                        || ' tried=' || COALESCE((SELECT string_agg(a.response_status_code || ' ' || left(a.response, 80)
                            || ' at ' || a.created_at::text, '; ') FROM attempts a WHERE a.msg_id = d.msg_id), '-')
                     FROM deliveries d WHERE NOT (d.msg_id = ANY ($1)) LIMIT 5",
                    &[&ids],
                )
                .await
                .unwrap();
            let stuck: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
            panic!("{} of {EVENTS} events delivered; undelivered: {stuck:?}", ids.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if api_load {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ids: HashSet<String> =
                throttled.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
            if ids.len() == API_MESSAGES {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {API_MESSAGES} API messages delivered through the throttle across the failover",
                ids.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // No key outlives its purpose: each one Hookgate wrote carries an expiry,
        // on every master now serving (the promoted replica included).
        let masters = match &redis {
            Backing::Cluster(c) => c.masters(),
            Backing::Sentinel(s) => vec![s.replica_port],
            Backing::Single(_) => vec![],
        };
        for port in masters {
            assert_eq!(keys_without_expiry(port), 0, "a key without expiry on the master on {port}");
        }
    }
    if let (Fault::None, Backing::Cluster(c)) = (fault, &redis) {
        // Redis was used: the committed keys are in the cluster, spread by tenant tag.
        // Best effort: under a loaded machine a call past its 250 ms timeout loses
        // its key (Postgres decided alone), so not every key need be there.
        let keys = c.count_keys("*}:in:*");
        assert!(keys >= EVENTS / 2, "{keys} inbound keys in the cluster");
    }
    if let Backing::Sentinel(s) = &redis {
        // Hookgate followed the failover: events sent now are written to the new
        // master (the replica the Sentinel promoted). Best effort per call, as above.
        let before = s.count_keys(s.replica_port, "*:in:*");
        for e in 0..20 {
            let body = format!(r#"{{"id":"evt_after_{e}","type":"race.test","data":{{}}}}"#);
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let sig = providers::stripe(SECRET, providers::now(), body.as_bytes());
                let r = http
                    .post(&urls[1 + e % 2])
                    .header("content-type", "application/json")
                    .header("Stripe-Signature", sig)
                    .body(body.clone())
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status() == 200) {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "an event after the failover got no 200");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let after = s.count_keys(s.replica_port, "*:in:*");
        assert!(after >= before + 10, "{} of 20 keys written to the new master", after - before);
    }
    for mut p in procs {
        p.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_of_5000_copies_over_3_instances_admits_each_event_once() {
    race(Fault::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_with_redis_flushed_in_the_middle_admits_each_event_once() {
    race(Fault::FlushRedis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_with_redis_stopped_in_the_middle_admits_each_event_once() {
    race(Fault::StopRedis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_with_an_instance_killed_in_the_middle_admits_each_event_once() {
    race(Fault::KillProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_over_a_redis_cluster_admits_each_event_once() {
    race_on(Backing::Cluster(RedisCluster::start()), Fault::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_over_a_redis_cluster_with_a_master_killed_in_the_middle_admits_each_event_once() {
    race_on(Backing::Cluster(RedisCluster::start()), Fault::KillClusterMaster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_under_redis_sentinel_with_the_master_killed_in_the_middle_admits_each_event_once_and_follows_the_failover(
) {
    race_on(Backing::Sentinel(RedisSentinel::start()), Fault::KillSentinelMaster).await;
}
