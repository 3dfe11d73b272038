//! Cron ingest sources: each tick is admitted once however many ingress
//! processes emit it, a tick missed while no ingress process ran is emitted when
//! one starts (the latest only: no burst), and a cron source has no door.

use std::time::Duration;

use hookgate_gateway::Role;
use hookgate_tests::{sink::Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn a_cron_tick_missed_while_no_ingress_ran_is_admitted_once_by_two_ingress_processes() {
    // The API alone: nothing ticks yet.
    let api = TestApp::spawn_role_default_env(Role::Api).await;
    let sink = Sink::start().await;
    let t = api.tenant().await;
    // Hourly, at a minute half an hour from now: its latest tick was half an hour
    // ago and its next is half an hour away, so no tick falls within the test.
    let minute = (chrono::Utc::now().timestamp() / 60 + 30) % 60;
    let schedule = format!("{minute} * * * *");
    let config = json!({"schedule": schedule, "payload": "{\"hello\":\"cron\"}", "contentType": "application/json"});
    let res = t
        .req(Method::POST, "/ingest/api/v1/source")
        .json(&json!({"name": "tick", "type": "cron", "config": config}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let source: Value = res.json().await.unwrap();
    assert_eq!(source["config"], config, "a cron source's settings are shown back");
    assert!(source["ingestUrl"].is_null(), "a cron source has no door: {source}");
    let id = source["id"].as_str().unwrap().to_owned();
    let res = t
        .req(Method::POST, &format!("/ingest/api/v1/source/{id}/endpoint"))
        .json(&json!({"url": sink.url}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    // The source has existed for three hours: three ticks came while no ingress process ran.
    let db = api.db.client().await;
    db.execute(
        "UPDATE sources SET created_at = now() - interval '3 hours', updated_at = now() - interval '3 hours'
         WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();

    // Two ingress processes (and a worker to deliver) start: the latest tick is
    // emitted by both, admitted once.
    let _a = api.spawn_sibling(Role::Ingress).await;
    let _b = api.spawn_sibling(Role::Ingress).await;
    let _worker = api.spawn_sibling(Role::Worker).await;
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got[0].body, b"{\"hello\":\"cron\"}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events: Vec<(String, String)> = db
        .query("SELECT id, event_type FROM inbound_events WHERE source_id = $1", &[&id])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(events.len(), 1, "one tick, admitted once, no burst of the older ones: {events:?}");
    assert_eq!(events[0].1, "cron");
    assert_eq!(sink.received().len(), 1, "delivered once");

    // No door: neither the plain one nor one with its own token.
    let sealed: Vec<u8> = db.query_one("SELECT ingest_token FROM sources WHERE id = $1", &[&id]).await.unwrap().get(0);
    let master = hookgate_shared::crypto::MasterKey::from_base64(&api.env["HOOKGATE_MASTER_KEY"]).unwrap();
    let tenant = hookgate_shared::ids::TenantId::parse(&t.id).unwrap();
    let token = master.tenant_key(&tenant).open(&format!("ingest-token:{id}"), &sealed).unwrap();
    let token = String::from_utf8(token).unwrap();
    for path in [format!("/in/{id}"), format!("/in/{id}/{token}")] {
        let res = _a.http.post(_a.url(&path)).body("{}").send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
    }
}
