//! Inbound dedupe keys are stored keyed per tenant (no stored key confirms a
//! guessed provider id without the master key), and an event a release before
//! the switch stored under its plain key stays a duplicate after it, in both modes.

use std::time::Duration;

use hookgate_gateway::Role;
use hookgate_ingress::key::KeyKind;
use hookgate_tests::{providers, sink::Sink, TestApp};
use serde_json::{json, Value};

const SECRET: &str = "whsec_keyed_keys_secret";

async fn send(app: &TestApp, source: &str, event_id: &str) -> (u16, Value) {
    let body = format!(r#"{{"id": "{event_id}", "type": "invoice.paid"}}"#);
    let res = app
        .http
        .post(app.url(&format!("/in/{source}")))
        .header("content-type", "application/json")
        .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), body.as_bytes()))
        .body(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

/// Every stored copy of the event's key.
async fn stored_keys(app: &TestApp, event: &str) -> Vec<String> {
    let db = app.db.client().await;
    let row = db
        .query_one(
            "SELECT k.key, e.key, m.idempotency_key FROM inbound_events e
             JOIN inbound_keys k ON k.tenant_id = e.tenant_id AND k.source_id = e.source_id AND k.event_id = e.id
             LEFT JOIN messages m ON m.tenant_id = e.tenant_id AND m.id = e.msg_id
             WHERE e.id = $1",
            &[&event],
        )
        .await
        .unwrap();
    (0..3).filter_map(|i| row.get::<_, Option<String>>(i)).collect()
}

/// Rewrites an event's stored keys to their plain form, as a release before the
/// switch stored them, and records the switch as just run.
async fn as_stored_before_the_switch(app: &TestApp, event: &str, plain: &str) {
    let db = app.db.client().await;
    db.batch_execute("UPDATE inbound_key_form SET keyed_at = now()").await.unwrap();
    for table in ["inbound_keys", "inbound_events"] {
        let id = if table == "inbound_keys" { "event_id" } else { "id" };
        let keyed = if table == "inbound_keys" { ", keyed = false" } else { "" };
        let sql = format!("UPDATE {table} SET key = $2{keyed} WHERE {id} = $1");
        let n = db.execute(&sql, &[&event, &plain]).await.unwrap();
        assert_eq!(n, 1, "{table}");
    }
}

#[tokio::test]
async fn a_stored_inbound_key_is_keyed_and_an_event_stored_plain_before_the_switch_stays_a_duplicate() {
    // No Redis: Postgres alone decides, so the duplicate below is its answer.
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let source =
        t.post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a}), 201).await;
    let src = source["id"].as_str().unwrap().to_owned();

    let (status, first) = send(&app, &src, "evt_before_switch").await;
    assert_eq!((status, first["status"].as_str()), (200, Some("accepted")), "{first}");
    let event = first["eventId"].as_str().unwrap().to_owned();
    let (keyed, plain) = app.inbound_key(&t.id, &src, KeyKind::Provider, b"evt_before_switch");
    assert_ne!(keyed, plain);
    // Stored, shown to the provider and carried by the message: only the keyed form.
    assert_eq!(first["key"].as_str(), Some(keyed.as_str()));
    assert_eq!(stored_keys(&app, &event).await, vec![keyed.clone(); 3]);

    as_stored_before_the_switch(&app, &event, &plain).await;
    // A process started after the switch reads when it ran (once per process).
    let after = app.spawn_sibling(Role::All).await;
    let (status, again) = send(&after, &src, "evt_before_switch").await;
    assert_eq!((status, again["status"].as_str(), again["eventId"].as_str()), (200, Some("duplicate"), Some(&*event)));
    // Found by the provider's id in the console's search through its plain key.
    let found = after
        .api(&t.key, reqwest::Method::GET, "/api/v1/search?q=evt_before_switch")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(found["inbound"][0]["event"]["id"].as_str(), Some(&*event), "{found}");

    // A new event after the switch is stored keyed, once.
    let (status, new) = send(&after, &src, "evt_after_switch").await;
    assert_eq!((status, new["status"].as_str()), (200, Some("accepted")));
    let (keyed_new, _) = app.inbound_key(&t.id, &src, KeyKind::Provider, b"evt_after_switch");
    assert_eq!(stored_keys(&app, new["eventId"].as_str().unwrap()).await, vec![keyed_new; 3]);
    let (_, dup) = send(&after, &src, "evt_after_switch").await;
    assert_eq!(dup["status"].as_str(), Some("duplicate"));
}

#[tokio::test]
async fn a_sync_event_left_in_flight_under_its_plain_key_is_taken_over_and_sent_with_its_first_webhook_id() {
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a, "mode": "sync"});
    let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let (_, plain) = app.inbound_key(&t.id, &src, KeyKind::Provider, b"evt_in_flight");
    // As a sync request of the release before the switch left it when every
    // process stopped for the switch: `processing` under its plain key, lease out.
    let db = app.db.client().await;
    db.batch_execute("UPDATE inbound_key_form SET keyed_at = now()").await.unwrap();
    let id = hookgate_shared::ids::InboundEventId::generate();
    db.execute(
        "WITH k AS (INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, keyed) VALUES ($1, $2, $3, $5, false))
         INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, event_type, content_type,
            payload, lease_until, lease_token)
         VALUES ($1, $2, $3, $5, 'processing', $4, 'invoice.paid',
            'application/json', '\\x7b7d', now() - interval '1 minute', 7)",
        &[&t.id, &src, &plain, &a, &id.as_str()],
    )
    .await
    .unwrap();
    let after = app.spawn_sibling(Role::All).await;
    let (status, res) = send(&after, &src, "evt_in_flight").await;
    assert_eq!((status, res["eventId"].as_str()), (200, Some(id.as_str())), "{res}");
    let got = sink.wait_for(1, Duration::from_secs(10)).await;
    // The webhook-id a sync event is forwarded with comes from the key it is stored under.
    assert_eq!(got[0].header("webhook-id"), Some(&*format!("in_{}", &plain[..32])));
    let status: String =
        db.query_one("SELECT status FROM inbound_events WHERE id = $1", &[&id.as_str()]).await.unwrap().get(0);
    assert_eq!(status, "completed");
    let (_, dup) = send(&after, &src, "evt_in_flight").await;
    assert_eq!((dup["status"].as_str(), dup["eventId"].as_str()), (Some("duplicate"), Some(id.as_str())));
}
