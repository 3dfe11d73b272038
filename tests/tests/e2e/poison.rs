//! No poison batch: nothing one endpoint answers, and no row deleted mid-flight,
//! can stop the worker from recording everyone else's deliveries.

use std::time::{Duration, Instant};

use hookgate_tests::{
    app::Tenant,
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

/// Short leases, so that a delivery whose result was lost would be sent again
/// within the test.
async fn short_leases() -> TestApp {
    TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "2".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "3".into());
    })
    .await
}

/// The message's attempts once at least one is recorded, or panics after `within`.
async fn recorded(t: &Tenant<'_>, app: &str, msg: &str, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let res = t.req(Method::GET, &format!("/api/v1/app/{app}/attempt/msg/{msg}")).send().await.unwrap();
        if res.status() == 200 {
            let page: Value = res.json().await.unwrap();
            let data = page["data"].as_array().cloned().unwrap_or_default();
            if !data.is_empty() {
                return data;
            }
        }
        assert!(Instant::now() < deadline, "no attempt of {msg} recorded within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn endpoint_answering(t: &Tenant<'_>, body: &[u8]) -> (String, Sink) {
    let sink = Sink::start().await;
    sink.set(Behaviour { body: Some(body.to_vec()), ..Behaviour::default() });
    let app = t.application().await;
    t.endpoint(&app, &sink.url, json!({})).await;
    (app, sink)
}

#[tokio::test]
async fn a_nul_or_invalid_utf8_in_a_response_is_recorded_and_stalls_no_one() {
    let app = short_leases().await;
    let (a, b, c) = (app.tenant().await, app.tenant().await, app.tenant().await);
    let (app_a, nul) = endpoint_answering(&a, b"a\0b").await;
    let (app_b, bad) = endpoint_answering(&b, b"\xff\xfe{").await;
    let (app_c, fine) = endpoint_answering(&c, b"ok").await;
    let msg_a = a.message(&app_a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let msg_b = b.message(&app_b, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    nul.wait_for(1, Duration::from_secs(10)).await;
    bad.wait_for(1, Duration::from_secs(10)).await;
    // Another tenant's delivery, sent after the hostile answers, is recorded at once.
    let msg_c = c.message(&app_c, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    fine.wait_for(1, Duration::from_secs(10)).await;
    let got = recorded(&c, &app_c, &msg_c, Duration::from_secs(5)).await;
    assert_eq!(got[0]["status"], 0);
    // The hostile endpoints' own attempts are recorded too, as text Postgres takes.
    let got = recorded(&a, &app_a, &msg_a, Duration::from_secs(5)).await;
    assert_eq!((got[0]["status"].as_i64(), got[0]["response"].as_str()), (Some(0), Some("a\u{FFFD}b")));
    let got = recorded(&b, &app_b, &msg_b, Duration::from_secs(5)).await;
    assert_eq!(got[0]["response"], "\u{FFFD}\u{FFFD}{");
    // Recorded means done: nothing comes again after the lease.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!((nul.received().len(), bad.received().len(), fine.received().len()), (1, 1, 1));
}

#[tokio::test]
async fn an_application_deleted_while_its_delivery_is_in_flight_stalls_no_one() {
    let app = short_leases().await;
    let t = app.tenant().await;
    let slow = Sink::start().await;
    slow.set(Behaviour { delay: Duration::from_millis(1500), ..Behaviour::default() });
    let doomed = t.application().await;
    t.endpoint(&doomed, &slow.url, json!({})).await;
    t.message(&doomed, "x", json!({})).await;
    slow.wait_for(1, Duration::from_secs(10)).await;
    let res = t.req(Method::DELETE, &format!("/api/v1/app/{doomed}")).send().await.unwrap();
    assert_eq!(res.status(), 204);
    // The in-flight result now names a message that is gone; later results still land.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (other, sink) = endpoint_answering(&t, b"ok").await;
    let msg = t.message(&other, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    recorded(&t, &other, &msg, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_result_postgres_keeps_refusing_is_quarantined_as_failed_and_holds_no_one() {
    let app = short_leases().await;
    let t = app.tenant().await;
    let (bad_app, bad) = endpoint_answering(&t, b"ok").await;
    let (good_app, good) = endpoint_answering(&t, b"ok").await;
    // A row Postgres refuses every time, whatever the worker does: a trigger that
    // raises for one application's attempts.
    let db = app.db.client().await;
    db.batch_execute(&format!(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON attempts FOR EACH ROW
           WHEN (NEW.app_id = '{bad_app}') EXECUTE FUNCTION refuse();"
    ))
    .await
    .unwrap();
    let bad_msg = t.message(&bad_app, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let good_msg = t.message(&good_app, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    bad.wait_for(1, Duration::from_secs(10)).await;
    good.wait_for(1, Duration::from_secs(10)).await;
    recorded(&t, &good_app, &good_msg, Duration::from_secs(5)).await;
    // The refused one ends failed, visible and resendable, and is counted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = t.get(&format!("/api/v1/app/{bad_app}/msg/{bad_msg}/endpoint")).await;
        if d["data"][0]["status"] == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "not quarantined: {d}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hookgate_delivery_records_quarantined_total 1"), "{metrics}");
    // Quarantined is not lost and not repeated: nothing more is sent after the lease.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!((bad.received().len(), good.received().len()), (1, 1));
}

async fn attempt_count(t: &Tenant<'_>, app: &str, msg: &str) -> usize {
    let res = t.req(Method::GET, &format!("/api/v1/app/{app}/attempt/msg/{msg}")).send().await.unwrap();
    if res.status() != 200 {
        return 0;
    }
    let page: Value = res.json().await.unwrap();
    page["data"].as_array().map_or(0, Vec::len)
}

/// A lock on one endpoint's row (a process cut off mid-record, a long statement)
/// times its batch out: the batch is split, and the others' results land at once.
#[tokio::test]
async fn a_locked_row_splits_its_batch_and_stalls_no_other_tenant() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_DB_STATEMENT_TIMEOUT_MS".into(), "1000".into());
        env.insert("HOOKGATE_EGRESS_TIMEOUT_SECS".into(), "2".into());
        env.insert("HOOKGATE_DELIVERY_LEASE_SECS".into(), "3".into());
    })
    .await;
    let (a, b) = (app.tenant().await, app.tenant().await);
    let (sink_x, sink_y) = (Sink::start().await, Sink::start().await);
    let app_x = a.application().await;
    let ex = a.endpoint(&app_x, &sink_x.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let app_y = b.application().await;
    b.endpoint(&app_y, &sink_y.url, json!({})).await;

    let mut db = app.db.client().await;
    let tx = db.transaction().await.unwrap();
    tx.query("SELECT 1 FROM endpoints WHERE id = $1 FOR UPDATE", &[&ex]).await.unwrap();

    a.message(&app_x, "x", json!({})).await;
    sink_x.wait_for(1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another tenant, another endpoint, nothing wrong with either.
    let msg_y = b.message(&app_y, "y", json!({})).await["id"].as_str().unwrap().to_owned();
    sink_y.wait_for(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut recorded = 0;
    while Instant::now() < deadline {
        recorded = attempt_count(&b, &app_y, &msg_y).await;
        if recorded > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let sent_y = sink_y.received().len();
    tx.rollback().await.unwrap();
    eprintln!("while one endpoint row was locked: y recorded={recorded}, y sent {sent_y} times");
    assert!(
        recorded > 0 && sent_y == 1,
        "tenant b's delivery was not recorded within 10 s ({recorded} attempts) and was sent {sent_y} times"
    );
}

/// A delivery quarantined after its attempt was made (the request went out, its
/// record was refused) is not "missing": replay-missing, which sends what ended
/// unsent, leaves it alone. Before, quarantine left its attempt count at 0 and
/// the replay sent it a second time.
#[tokio::test]
async fn replay_missing_does_not_send_again_a_delivery_quarantined_after_its_attempt_was_made() {
    let app = short_leases().await;
    let t = app.tenant().await;
    let (a, sink) = endpoint_answering(&t, b"ok").await;
    let db = app.db.client().await;
    db.batch_execute(&format!(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON attempts FOR EACH ROW
           WHEN (NEW.app_id = '{a}') EXECUTE FUNCTION refuse();"
    ))
    .await
    .unwrap();
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let ep = loop {
        let d = t.get(&format!("/api/v1/app/{a}/msg/{msg}/endpoint")).await;
        if d["data"][0]["status"] == 2 {
            break d["data"][0]["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "not quarantined: {d}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    db.batch_execute("DROP TRIGGER refuse ON attempts").await.unwrap();
    let since = chrono::Utc::now() - chrono::Duration::minutes(5);
    let task = t.post(&format!("/api/v1/app/{a}/endpoint/{ep}/replay-missing"), json!({ "since": since }), 202).await;
    let task = task["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = t.get(&format!("/api/v1/background-task/{task}")).await;
        if got["status"] == "finished" {
            assert_eq!(got["data"]["messagesSent"], 0, "{got}");
            break;
        }
        assert!(Instant::now() < deadline, "the replay never finished: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sink.received().len(), 1, "the quarantined delivery was sent again by the replay");
}
