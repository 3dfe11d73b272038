//! The one fan-out rule on every path that creates deliveries: the API's batched
//! and single publishing (in `delivery`), and here ingress's async group commit
//! and sync forwarding.

use std::time::Duration;

use hookgate_tests::{providers, sink::Sink, TestApp};
use serde_json::json;

const SECRET: &str = "whsec_fanout_test_secret";

#[tokio::test]
async fn sync_and_async_forward_only_to_endpoints_subscribed_to_the_event_type() {
    let app = TestApp::spawn().await;
    let (all, paid, chan, off) = (Sink::start().await, Sink::start().await, Sink::start().await, Sink::start().await);
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &all.url, json!({})).await;
    t.post("/api/v1/event-type", json!({"name": "invoice.paid", "description": "paid"}), 201).await;
    t.endpoint(&a, &paid.url, json!({"eventTypes": ["invoice.paid"]})).await;
    // A message from a provider carries no channel: a channel-only endpoint takes none.
    t.endpoint(&a, &chan.url, json!({"channels": ["eu"]})).await;
    t.endpoint(&a, &off.url, json!({"disabled": true})).await;
    for mode in ["async", "sync"] {
        let body = json!({"name": mode, "provider": "stripe", "secret": SECRET, "appId": a, "mode": mode});
        let source = t.post("/api/v1/source", body, 201).await;
        for kind in ["invoice.paid", "invoice.created"] {
            let event = format!(r#"{{"id": "evt_{mode}_{kind}", "type": "{kind}"}}"#);
            let res = app
                .http
                .post(app.url(&format!("/in/{}", source["id"].as_str().unwrap())))
                .header("content-type", "application/json")
                .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), event.as_bytes()))
                .body(event)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{mode} {kind}: {}", res.text().await.unwrap());
        }
    }
    let wait = Duration::from_secs(15);
    all.wait_for(4, wait).await;
    paid.wait_for(2, wait).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let types = |s: &Sink| {
        let mut v: Vec<String> = s
            .received()
            .iter()
            .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["type"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(types(&all), ["invoice.created", "invoice.created", "invoice.paid", "invoice.paid"]);
    assert_eq!(types(&paid), ["invoice.paid", "invoice.paid"]);
    assert!(chan.received().is_empty(), "a channel-only endpoint takes no channel-less message");
    assert!(off.received().is_empty(), "a disabled endpoint takes nothing");
}
