//! Background tasks (endpoint replays) under faults: a task whose steps fail
//! cannot hold up the others, and fails only once it has kept failing.

use std::time::Duration;

use serde_json::json;

use hookgate_tests::{app::TestApp, sink::Sink};

const WAIT: Duration = Duration::from_secs(20);

/// Polls the task until `done` holds for it; returns it.
async fn task_until(
    t: &hookgate_tests::app::Tenant<'_>,
    id: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let task = t.get(&format!("/api/v1/background-task/{id}")).await;
        if done(&task) {
            return task;
        }
        assert!(std::time::Instant::now() < deadline, "task never got there: {task}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_whose_steps_fail_goes_behind_the_others_and_fails_only_once_it_has_kept_failing() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let ep = ep["id"].as_str().unwrap();
    for i in 0..3 {
        t.message(&a, "x", json!({ "i": i })).await;
    }
    sink.wait_for(3, WAIT).await;
    let since = chrono::Utc::now() - chrono::Duration::minutes(5);
    let path = format!("/api/v1/app/{a}/endpoint/{ep}/bulk-replay");
    // The older task is picked first; its stored filter is made unreadable, so
    // each of its steps fails (as one whose statement kept timing out would).
    let bad = t.post(&path, json!({ "since": since }), 202).await["id"].as_str().unwrap().to_owned();
    let db = app.db.client().await;
    db.execute(
        "UPDATE background_tasks SET filter = '{\"eventTypes\": 5}', updated_at = now() - interval '1 hour' WHERE id = $1",
        &[&bad],
    )
    .await
    .unwrap();
    let good = t.post(&path, json!({ "since": since }), 202).await["id"].as_str().unwrap().to_owned();

    let done = task_until(&t, &good, |task| task["status"] != "running").await;
    assert_eq!(done["status"], "finished", "the good task is not held up: {done}");
    assert_eq!(done["data"]["messagesSent"], 3);
    sink.wait_for(6, WAIT).await;
    let row = db
        .query_one("SELECT status, tries, failing_since IS NOT NULL FROM background_tasks WHERE id = $1", &[&bad])
        .await
        .unwrap();
    let (status, tries, failing): (i16, i16, bool) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(status, 0, "a few failed steps within a minute end no task");
    assert!(tries >= 1 && failing, "its failures are counted: {tries}");

    // Failing for over a minute: the next failure ends it, saying so.
    db.execute(
        "UPDATE background_tasks SET failing_since = now() - interval '2 minutes', tries = 4 WHERE id = $1",
        &[&bad],
    )
    .await
    .unwrap();
    let failed = task_until(&t, &bad, |task| task["status"] != "running").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["data"]["error"].as_str().unwrap().contains("kept failing"), "{failed}");
    assert!(!failed["data"]["error"].as_str().unwrap().contains("eventTypes"), "the cause stays in the log");
}

#[tokio::test]
async fn a_task_that_ended_longer_ago_than_the_message_retention_is_pruned_and_a_running_one_is_kept() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let ep = ep["id"].as_str().unwrap();
    let path = format!("/api/v1/app/{a}/endpoint/{ep}/replay-missing");
    let since = chrono::Utc::now() - chrono::Duration::minutes(5);
    let old = t.post(&path, json!({ "since": since }), 202).await["id"].as_str().unwrap().to_owned();
    let recent = t.post(&path, json!({ "since": since }), 202).await["id"].as_str().unwrap().to_owned();
    task_until(&t, &old, |task| task["status"] == "finished").await;
    task_until(&t, &recent, |task| task["status"] == "finished").await;
    let db = app.db.client().await;
    db.execute("UPDATE background_tasks SET updated_at = now() - interval '100 days' WHERE id = $1", &[&old])
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left: Vec<String> = db
            .query("SELECT id FROM background_tasks ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if left == vec![recent.clone()] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left: {left:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
