//! A streaming replica (`HOOKGATE_DATABASE_REPLICA_URL`, made with
//! `pg_basebackup -R`) serving the reads that tolerate staleness, and the
//! primary serving them while the replica lags or is gone.

use std::time::{Duration, Instant};

use hookgate_tests::{servers::PgServer, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// The ids of the application's messages, newest first, as the list answers them.
async fn listed(app: &TestApp, key: &str, a: &str) -> Vec<String> {
    let res = app.api(key, Method::GET, &format!("/api/v1/app/{a}/msg")).send().await.unwrap();
    assert_eq!(res.status(), 200, "a list answers whichever server reads it");
    let page: Value = res.json().await.unwrap();
    page["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

/// The same, as the search answers them.
async fn searched(app: &TestApp, key: &str, a: &str) -> Vec<String> {
    let res = app.api(key, Method::POST, &format!("/api/v1/app/{a}/msg/search")).json(&json!({})).send().await.unwrap();
    assert_eq!(res.status(), 200, "a search answers whichever server reads it");
    let page: Value = res.json().await.unwrap();
    page["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect()
}

/// A replica gauge: its value for the only replica, or the one on `port`.
async fn gauge(app: &TestApp, name: &str) -> f64 {
    gauge_of(app, name, None).await
}

async fn gauge_of(app: &TestApp, name: &str, port: Option<u16>) -> f64 {
    found(app, name, port).await.unwrap_or_else(|| panic!("{name} missing"))
}

/// A replica gauge's value, or `None` while the process has not reported it
/// yet (the watcher's first round runs a moment after the server starts).
async fn found(app: &TestApp, name: &str, port: Option<u16>) -> Option<f64> {
    let text = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    let label = port.map(|p| format!("{name}{{replica=\"127.0.0.1:{p}\"}} "));
    let line = text.lines().find(|l| match &label {
        Some(label) => l.starts_with(label.as_str()),
        None => l.starts_with(&format!("{name}{{")),
    })?;
    Some(line.rsplit(' ').next().unwrap().parse().unwrap())
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn lists_are_read_on_the_replica_while_it_keeps_up_and_on_the_primary_when_it_lags_or_is_down() {
    let primary = PgServer::start();
    let standby = primary.standby();
    let app = TestApp::spawn_on_server(&primary, "replica", |env| {
        env.insert("HOOKGATE_DATABASE_REPLICA_URL".into(), standby.url());
        env.insert("HOOKGATE_REPLICA_MAX_LAG_MS".into(), "4000".into());
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let first = t.message(&a, "a.b", json!({"n": 1})).await["id"].as_str().unwrap().to_owned();
    until("the replica is read and has the first message", async || {
        found(&app, "hookgate_replica_in_use", None).await == Some(1.0)
            && listed(&app, &t.key, &a).await == vec![first.clone()]
    })
    .await;

    // Replay paused: the replica falls behind. Until it is found too far behind, the
    // list is the replica's, without the message just made (which the primary has).
    standby.sql("SELECT pg_wal_replay_pause()");
    let second = t.message(&a, "a.b", json!({"n": 2})).await["id"].as_str().unwrap().to_owned();
    let got = t.get(&format!("/api/v1/app/{a}/msg/{second}")).await;
    assert_eq!(got["id"], second.as_str(), "a GET after a create is the primary's");
    assert_eq!(listed(&app, &t.key, &a).await, vec![first.clone()], "the list is read on the replica");
    assert_eq!(searched(&app, &t.key, &a).await, vec![first.clone()], "so is the search");
    // Past the bound, the primary answers, with both.
    until("the primary takes the reads of a replica too far behind", async || {
        listed(&app, &t.key, &a).await == vec![second.clone(), first.clone()]
    })
    .await;
    assert_eq!(gauge(&app, "hookgate_replica_in_use").await, 0.0);
    assert!(gauge(&app, "hookgate_replica_lag_seconds").await > 4.0);

    // Caught up again, it is read again.
    standby.sql("SELECT pg_wal_replay_resume()");
    until("the replica is read again once it has caught up", async || {
        gauge(&app, "hookgate_replica_in_use").await == 1.0
    })
    .await;

    // Gone: every read is still answered, by the primary.
    standby.stop();
    for _ in 0..20 {
        assert_eq!(listed(&app, &t.key, &a).await, vec![second.clone(), first.clone()]);
        assert_eq!(searched(&app, &t.key, &a).await, vec![second.clone(), first.clone()]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until("the replica is set aside", async || gauge(&app, "hookgate_replica_in_use").await == 0.0).await;
    assert_eq!(gauge(&app, "hookgate_replica_lag_seconds").await, -1.0);
}

#[tokio::test]
async fn a_replica_url_naming_another_database_is_refused_and_never_read() {
    let primary = PgServer::start();
    // Another database on the same cluster, so on its standby too: a staging copy, say.
    primary.sql("CREATE DATABASE staging");
    let standby = primary.standby();
    let elsewhere = standby.url().replace("/hookgate", "/staging");
    let app = TestApp::spawn_on_server(&primary, "replica", |env| {
        env.insert("HOOKGATE_DATABASE_REPLICA_URL".into(), elsewhere);
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let id = t.message(&a, "a.b", json!({"n": 1})).await["id"].as_str().unwrap().to_owned();
    until("the check has run", async || found(&app, "hookgate_replica_lag_seconds", None).await == Some(-1.0)).await;
    for _ in 0..10 {
        assert_eq!(gauge(&app, "hookgate_replica_in_use").await, 0.0);
        assert_eq!(listed(&app, &t.key, &a).await, vec![id.clone()], "read on the primary");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two replica hosts in one URL: each is checked and read on its own, so with
/// one stopped the other still serves the lists (not the primary: both are held
/// behind it, so the message just made is missing from what they answer).
#[tokio::test]
async fn with_two_replicas_one_stopped_the_other_serves_the_reads() {
    let primary = PgServer::start();
    let (one, two) = (primary.standby(), primary.standby());
    let app = TestApp::spawn_on_server(&primary, "replica", |env| {
        let url = format!("postgres://hookgate@127.0.0.1:{},127.0.0.1:{}/hookgate", one.port, two.port);
        env.insert("HOOKGATE_DATABASE_REPLICA_URL".into(), url);
        env.insert("HOOKGATE_REPLICA_MAX_LAG_MS".into(), "60000".into());
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let first = t.message(&a, "a.b", json!({"n": 1})).await["id"].as_str().unwrap().to_owned();
    until("both replicas are read and have the first message", async || {
        found(&app, "hookgate_replica_in_use", Some(one.port)).await == Some(1.0)
            && found(&app, "hookgate_replica_in_use", Some(two.port)).await == Some(1.0)
            && listed(&app, &t.key, &a).await == vec![first.clone()]
    })
    .await;
    one.sql("SELECT pg_wal_replay_pause()");
    two.sql("SELECT pg_wal_replay_pause()");
    let second = t.message(&a, "a.b", json!({"n": 2})).await["id"].as_str().unwrap().to_owned();
    for _ in 0..6 {
        assert_eq!(listed(&app, &t.key, &a).await, vec![first.clone()], "each replica answers, in turn");
    }
    one.stop();
    // Reads that found it gone set it aside at once; the other answers them all.
    for _ in 0..10 {
        assert_eq!(listed(&app, &t.key, &a).await, vec![first.clone()], "the other replica answers, not the primary");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until("the stopped replica is set aside", async || {
        gauge_of(&app, "hookgate_replica_in_use", Some(one.port)).await == 0.0
    })
    .await;
    assert_eq!(gauge_of(&app, "hookgate_replica_in_use", Some(two.port)).await, 1.0);
    assert_eq!(gauge_of(&app, "hookgate_replica_lag_seconds", Some(one.port)).await, -1.0);
    two.sql("SELECT pg_wal_replay_resume()");
    until("the second message is read once the other replica replays it", async || {
        listed(&app, &t.key, &a).await == vec![second.clone(), first.clone()]
    })
    .await;
}
