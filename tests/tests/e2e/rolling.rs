//! A rolling upgrade under load: two processes of the previous release
//! (`HOOKGATE_BASE_BIN`, built by `scripts/build-base.sh` from the commit in
//! `tests/upgrade-base`) serve while API messages (under `Idempotency-Key`) and
//! Stripe-signed events (each sent twice) arrive; this release's `hookgate
//! migrate` runs, two processes of this release start, and the old ones are
//! stopped one at a time (SIGTERM, as an orchestrator does), the load going on
//! to whichever processes are up. No request is answered with an error, every
//! message is delivered, every event admitted once.

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hookgate_tests::{
    app::default_env,
    process::{hookgate_at, hookgate_bin, Served},
    providers,
    sink::Sink,
    TestApp, TestDb,
};
use serde_json::{json, Value};

const MESSAGES: usize = 120;
const EVENTS: usize = 60;
const SECRET: &str = "whsec_rolling_test_secret";

/// The processes taking traffic now; a client picks one per try.
type Live = Arc<Mutex<Vec<String>>>;
/// Which process answered 2xx, and when.
type Served2xx = Arc<Mutex<Vec<(String, Instant)>>>;

/// Sends until a 2xx; a refused connection (a process going away) is tried on
/// another, an answer that is not a 2xx is recorded as an error and tried again.
async fn send(
    http: &reqwest::Client,
    live: &Live,
    errors: &Arc<Mutex<Vec<String>>>,
    served: &Served2xx,
    n: usize,
    request: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
) -> Option<Value> {
    for attempt in 0..600 {
        let base = {
            let l = live.lock().unwrap();
            l[(n + attempt) % l.len()].clone()
        };
        match request(http, &base).send().await {
            Ok(res) if res.status().is_success() => {
                served.lock().unwrap().push((base, Instant::now()));
                return Some(res.json().await.unwrap_or(Value::Null));
            }
            Ok(res) => {
                let status = res.status();
                let body = res.text().await.unwrap_or_default();
                errors.lock().unwrap().push(format!("{base}: {status} {body}"));
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[tokio::test]
async fn a_rolling_upgrade_under_load_answers_no_error_and_loses_nothing() {
    let base = PathBuf::from(
        std::env::var("HOOKGATE_BASE_BIN")
            .expect("HOOKGATE_BASE_BIN: scripts/test.sh builds the previous release (scripts/build-base.sh)"),
    );
    let db = TestDb::empty().await;
    let mut env = default_env(&db);
    env.insert("HOOKGATE_WORKER_POLL_MS".into(), "200".into());
    let migrate = |bin: PathBuf, env: HashMap<String, String>| async move {
        let pairs =
            [("DATABASE_URL", env["DATABASE_URL"].as_str()), ("HOOKGATE_MASTER_KEY", &env["HOOKGATE_MASTER_KEY"])];
        let out = hookgate_at(&bin, &pairs).arg("migrate").output().await.unwrap();
        assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
    };
    migrate(base.clone(), env.clone()).await;
    let mut old = [Served::start_bin(&base, &env, "all").await, Served::start_bin(&base, &env, "all").await];
    let live: Live = Arc::new(Mutex::new(old.iter().map(|p| p.url("")).collect()));
    let admin = TestApp {
        base: old[0].url(""),
        port: old[0].port,
        metrics_port: 0,
        db: db.clone(),
        http: reqwest::Client::new(),
        env: env.clone(),
    };
    let t = admin.tenant().await;
    let sink = Sink::start().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a});
    let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let key = t.key.clone();

    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let served: Served2xx = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for m in 0..MESSAGES {
        let (http, live, errors, served, a, key) =
            (http.clone(), live.clone(), errors.clone(), served.clone(), a.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(m as u64 * 60)).await;
            let idem = format!("roll-{m}");
            let sent = send(&http, &live, &errors, &served, m, |h, base| {
                h.post(format!("{base}/api/v1/app/{a}/msg"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", &idem)
                    .json(&json!({"eventType": "rolling.api", "payload": {"m": m}}))
            })
            .await;
            ("msg", m, sent)
        }));
    }
    for e in 0..EVENTS {
        for copy in 0..2 {
            let (http, live, errors, served, src) =
                (http.clone(), live.clone(), errors.clone(), served.clone(), src.clone());
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis((e * 120 + copy * 50) as u64)).await;
                let event = format!(r#"{{"id": "evt_roll_{e}", "type": "rolling.in"}}"#);
                let sent = send(&http, &live, &errors, &served, e + copy, |h, base| {
                    providers::stripe_post(h, &format!("{base}/in/{src}"), SECRET, &event)
                })
                .await;
                ("in", e, sent)
            }));
        }
    }

    // The rollout, while the load runs (about seven seconds of it).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    migrate(hookgate_bin(), env.clone()).await;
    let new = [Served::start(&env, "all").await, Served::start(&env, "all").await];
    live.lock().unwrap().extend(new.iter().map(|p| p.url("")));
    let joined = Instant::now();
    let mut stopping = None;
    for p in old.iter_mut() {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(p.child.try_wait().unwrap().is_none(), "a process of the previous release died beside this one");
        let url = p.url("");
        live.lock().unwrap().retain(|u| *u != url);
        stopping.get_or_insert_with(Instant::now);
        let pid = p.child.id().unwrap().to_string();
        tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        let status = p.child.wait().await.unwrap();
        assert!(status.success(), "a process of the previous release stopped with {status}");
    }
    // Both releases answered while the other was up.
    let (olds, news): (Vec<String>, Vec<String>) =
        (old.iter().map(|p| p.url("")).collect(), new.iter().map(|p| p.url("")).collect());
    let stopping = stopping.unwrap();
    let answered = served.lock().unwrap().clone();
    assert!(
        answered.iter().any(|(b, at)| olds.contains(b) && *at > joined),
        "the previous release served beside this one"
    );
    assert!(
        answered.iter().any(|(b, at)| news.contains(b) && *at < stopping),
        "this release served beside the previous one"
    );

    let mut admitted: HashMap<usize, HashSet<String>> = HashMap::new();
    let mut accepted = HashSet::new();
    for task in tasks {
        let (kind, n, sent) = task.await.unwrap();
        let sent = sent.unwrap_or_else(|| panic!("{kind} {n} was never answered 2xx"));
        match kind {
            "in" => {
                admitted.entry(n).or_default().insert(sent["eventId"].as_str().unwrap_or_default().to_owned());
            }
            _ => {
                accepted.insert(sent["id"].as_str().unwrap().to_owned());
            }
        }
    }
    let errors = errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "answered with an error during the rollout: {errors:?}");
    assert!(admitted.values().all(|ids| ids.len() == 1), "both copies of an event answered the same event");
    let pg = db.client().await;
    let events: i64 = pg.query_one("SELECT count(*) FROM inbound_events", &[]).await.unwrap().get(0);
    assert_eq!(events as usize, EVENTS, "each event admitted once");
    let messages: HashSet<String> =
        pg.query("SELECT id FROM messages", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(messages.len(), MESSAGES + EVENTS, "one message per key and per event");
    assert!(accepted.is_subset(&messages));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: HashSet<String> =
            sink.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_owned)).collect();
        if got == messages {
            break;
        }
        assert!(got.is_subset(&messages), "nothing but messages is sent");
        assert!(Instant::now() < deadline, "{} of {} delivered after the rollout", got.len(), messages.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
