//! Switching a source between sync and async mode: an event is never answered as
//! a duplicate without having been forwarded, and never held in flight forever.

use std::time::Duration;

use hookgate_ingress::key::KeyKind;
use hookgate_shared::ids::{AppId, SourceId, TenantId};
use hookgate_tests::{app::Tenant, providers, sink::Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_modes_test_secret";

struct Source<'a> {
    app: &'a TestApp,
    id: String,
}

impl Source<'_> {
    async fn send(&self, event_id: &str) -> (u16, Value, String) {
        let body = format!(r#"{{"id": "{event_id}", "type": "invoice.paid"}}"#);
        let res = self
            .app
            .http
            .post(self.app.url(&format!("/in/{}", self.id)))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), body.as_bytes()))
            .body(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let dup = res.headers().get("hookgate-duplicate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        (status, res.json().await.unwrap_or(Value::Null), dup)
    }
}

async fn source<'a>(app: &'a TestApp, t: &Tenant<'_>, sink: &Sink, mode: &str) -> (Source<'a>, String) {
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": a, "mode": mode});
    let s = t.post("/api/v1/source", body, 201).await;
    (Source { app, id: s["id"].as_str().unwrap().to_owned() }, a)
}

#[tokio::test]
async fn an_event_abandoned_mid_forward_in_sync_mode_is_admitted_after_a_switch_to_async() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let (src, app_id) = source(&app, &t, &sink, "async").await;
    // As a sync-mode request that died mid-forward left it: `processing`, lease run out.
    let tenant = TenantId::parse(&t.id).unwrap();
    let source_id = SourceId::parse(&src.id).unwrap();
    let (key, _) = app.inbound_key(&t.id, &src.id, KeyKind::Provider, b"evt_abandoned");
    let db = app.db.client().await;
    let id = hookgate_shared::ids::InboundEventId::generate();
    db.execute(
        "WITH k AS (INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, keyed) VALUES ($1, $2, $3, $5, true))
         INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, event_type, content_type,
            payload, lease_until, lease_token)
         VALUES ($1, $2, $3, $5, 'processing', $4, 'invoice.paid',
            'application/json', '\\x7b7d', now() - interval '1 minute', 7)",
        &[&tenant.as_str(), &source_id.as_str(), &key, &AppId::parse(&app_id).unwrap().as_str(), &id.as_str()],
    )
    .await
    .unwrap();
    let (status, body, dup) = src.send("evt_abandoned").await;
    assert_eq!((status, body["status"].as_str(), dup.as_str()), (200, Some("accepted"), "false"), "{body}");
    sink.wait_for(1, Duration::from_secs(10)).await;
    let (status, _, dup) = src.send("evt_abandoned").await;
    assert_eq!((status, dup.as_str()), (200, "true"));
}

#[tokio::test]
async fn an_event_admitted_in_async_mode_is_a_duplicate_after_a_switch_to_sync() {
    // Without Redis, so that Postgres (not the fast path) answers the copy.
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let (src, _) = source(&app, &t, &sink, "async").await;
    assert_eq!(src.send("evt_switched").await.0, 200);
    sink.wait_for(1, Duration::from_secs(10)).await;
    let res = t.req(Method::PATCH, &format!("/api/v1/source/{}", src.id)).json(&json!({"mode": "sync"})).send().await;
    assert_eq!(res.unwrap().status(), 200);
    let (status, body, dup) = src.send("evt_switched").await;
    assert_eq!((status, dup.as_str()), (200, "true"), "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.received().len(), 1, "not forwarded again");
}
