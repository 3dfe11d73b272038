//! The dedupe window ends cleanly: a key that returns after its inbound event was
//! pruned is admitted again, as a new event with a new message, never a 500.

use std::time::Duration;

use hookgate_tests::{providers, sink::Sink, TestApp};
use serde_json::{json, Value};

const SECRET: &str = "whsec_window_test_secret";

#[tokio::test]
async fn a_key_that_returns_after_its_event_was_pruned_is_admitted_as_a_new_event() {
    // No Redis: its key would expire with the same retention as the row.
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source =
        t.post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a}), 201).await;
    let src = source["id"].as_str().unwrap().to_owned();
    let event = r#"{"id": "evt_returns", "type": "invoice.paid"}"#;
    let send = || async {
        let res = app
            .http
            .post(app.url(&format!("/in/{src}")))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), event.as_bytes()))
            .body(event)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    let (status, first) = send().await;
    assert_eq!((status, first["status"].as_str()), (200, Some("accepted")));
    sink.wait_for(1, Duration::from_secs(10)).await;
    // The window passes: the pruner removes the key, which ends the window, and
    // the event (its message stays).
    let db = app.db.client().await;
    let key = first["key"].as_str().unwrap();
    assert_eq!(db.execute("DELETE FROM inbound_keys WHERE key = $1", &[&key]).await.unwrap(), 1);
    assert_eq!(db.execute("DELETE FROM inbound_events WHERE key = $1", &[&key]).await.unwrap(), 1);
    let (status, again) = send().await;
    assert_eq!((status, again["status"].as_str()), (200, Some("accepted")), "{again}");
    assert_ne!(again["eventId"], first["eventId"], "a new event");
    assert_eq!(again["key"], first["key"], "the same key");
    // A new message, delivered: the endpoint sees the same Idempotency-Key twice.
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_ne!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].header("idempotency-key"), got[1].header("idempotency-key"));
    let (status, third) = send().await;
    assert_eq!((status, third["status"].as_str()), (200, Some("duplicate")), "inside the new window");
}
