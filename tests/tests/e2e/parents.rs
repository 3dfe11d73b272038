//! The hot tables have no foreign keys (migration 0045): deleting a source or
//! erasing an application under load still leaves no row of theirs behind, since
//! every writer locks the parents it writes under and the deletions take the
//! parent first, then what is under it.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hookgate_tests::{sink::Sink, TestApp};
use reqwest::Method;
use serde_json::json;

const SECRET: &str = "whsec_parents";

#[tokio::test]
async fn a_source_deleted_while_events_arrive_leaves_no_key_or_event_behind() {
    source_deleted_while_events_arrive("async").await;
}

/// The same for a source that forwards each event before it answers.
#[tokio::test]
async fn a_sync_source_deleted_while_events_arrive_answers_each_admitted_or_not_found() {
    source_deleted_while_events_arrive("sync").await;
}

async fn source_deleted_while_events_arrive(mode: &str) {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source = t.stripe_source(&a, SECRET, json!({"mode": mode})).await;
    // Eight senders, each a stream of distinct events, while the source is deleted.
    let senders = (0..8).map(|s| {
        let (app, source) = (&app, source.clone());
        async move {
            let mut accepted = 0;
            for n in 0..40 {
                let body = format!(r#"{{"id":"evt_{s}_{n}","type":"t"}}"#);
                // Admitted, or refused as for a source that does not exist: one caught
                // by the deletion in flight is not told to retry (503) either.
                match app.send_stripe(&source, SECRET, &body).await.status().as_u16() {
                    200 => accepted += 1,
                    404 => {}
                    other => panic!("evt_{s}_{n} answered {other}"),
                }
            }
            accepted
        }
    });
    let delete = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let res = t.req(Method::DELETE, &format!("/api/v1/source/{source}")).send().await.unwrap();
        assert_eq!(res.status(), 204);
    };
    let (accepted, ()) = tokio::join!(join_all(senders), delete);
    let accepted: i32 = accepted.iter().sum();
    assert!(accepted > 0, "some events were admitted before the deletion");
    assert!(accepted < 320, "the deletion came while events still arrived");
    // Late requests are refused; nothing is left under the source.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.send_stripe(&source, SECRET, r#"{"id":"evt_late","type":"t"}"#).await.status(), 404);
    assert_eq!(app.count("SELECT count(*) FROM inbound_keys WHERE source_id = $1", &source).await, 0);
    assert_eq!(app.count("SELECT count(*) FROM inbound_events WHERE source_id = $1", &source).await, 0);
    // The messages admitted before were the application's, and stay (a sync
    // source forwards its events without making messages).
    if mode == "async" {
        assert!(app.count("SELECT count(*) FROM messages WHERE app_id = $1", &a).await >= accepted as i64);
    }
}

#[tokio::test]
async fn an_application_erased_while_messages_arrive_leaves_no_row_behind() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source = t.stripe_source(&a, SECRET, json!({})).await;
    // API messages and provider events for the application, while it is erased.
    let publishers = (0..4).map(|p| {
        let (t, a) = (&t, a.clone());
        async move {
            for n in 0..40 {
                let res = t
                    .req(Method::POST, &format!("/api/v1/app/{a}/msg"))
                    .json(&json!({"eventType": "t", "payload": {"p": p, "n": n}}))
                    .send()
                    .await
                    .unwrap();
                assert!([202, 404].contains(&res.status().as_u16()), "{}", res.status());
            }
        }
    });
    let admissions = (0..4).map(|s| {
        let (app, source) = (&app, source.clone());
        async move {
            for n in 0..40 {
                let body = format!(r#"{{"id":"evt_{s}_{n}","type":"t"}}"#);
                app.send_stripe(&source, SECRET, &body).await;
            }
        }
    });
    let erase = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let res = t.req(Method::DELETE, &format!("/api/v1/app/{a}")).send().await.unwrap();
        assert!(res.status().is_success(), "{}", res.status());
    };
    tokio::join!(join_all(publishers), join_all(admissions), erase);
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.count("SELECT count(*) FROM applications WHERE id = $1", &a).await > 0 {
        assert!(Instant::now() < deadline, "the erasure did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Anything in flight when the application went has landed by now (or never will).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for table in ["messages", "deliveries", "attempts", "inbound_events"] {
        let sql = format!("SELECT count(*) FROM {table} WHERE app_id = $1");
        assert_eq!(app.count(&sql, &a).await, 0, "{table} of the erased application");
    }
    assert_eq!(app.count("SELECT count(*) FROM inbound_keys WHERE source_id = $1", &source).await, 0);
}
