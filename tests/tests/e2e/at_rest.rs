//! No secret is stored in clear: an endpoint's custom headers (credentials by
//! nature) are sealed at rest, shown through the API and sent as set.

use std::time::Duration;

use hookgate_tests::{sink::Sink, TestApp};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn custom_endpoint_headers_are_sealed_at_rest_and_sent_as_set() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/app/{a}/endpoint/{ep}/headers");
    let body = json!({"headers": {"Authorization": "Bearer s3cr3t-header-value", "X-Team": "blue-team-value"}});
    assert_eq!(t.req(Method::PUT, &path).json(&body).send().await.unwrap().status(), 204);
    let patch = json!({"headers": {"X-Extra": "extra-header-value"}});
    assert_eq!(t.req(Method::PATCH, &path).json(&patch).send().await.unwrap().status(), 204);

    let db = app.db.client().await;
    let rows = db.query("SELECT t::text FROM endpoints t", &[]).await.unwrap();
    for r in rows {
        let text: String = r.get(0);
        for clear in ["s3cr3t-header-value", "blue-team-value", "extra-header-value"] {
            assert!(!text.contains(clear), "the endpoints table holds `{clear}` in clear: {text}");
        }
    }
    let shown = t.get(&path).await;
    assert_eq!(shown["headers"], json!({"X-Extra": "extra-header-value", "X-Team": "blue-team-value"}));
    assert_eq!(shown["sensitive"], json!(["Authorization"]));
    // `:sealed`, the stored form's own key, is not a header name, so nobody can set it.
    let res = t.req(Method::PUT, &path).json(&json!({"headers": {":sealed": "x"}})).send().await.unwrap();
    assert_eq!(res.status(), 422);

    t.message(&a, "x", json!({})).await;
    let got = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].header("authorization"), Some("Bearer s3cr3t-header-value"));
    assert_eq!(got[0].header("x-team"), Some("blue-team-value"));
    assert_eq!(got[0].header("x-extra"), Some("extra-header-value"));
}

#[tokio::test]
async fn headers_stored_in_clear_before_sealing_are_sealed_when_a_worker_starts() {
    let app = TestApp::spawn_role_default_env(hookgate_gateway::Role::Api).await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    // As an earlier version stored them: a plain object of names to values.
    let db = app.db.client().await;
    let legacy = json!({"X-Legacy": "legacy-header-value"});
    db.execute("UPDATE endpoints SET headers = $1 WHERE id = $2", &[&legacy, &ep]).await.unwrap();
    let _worker = app.spawn_sibling(hookgate_gateway::Role::Worker).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = db.query_one("SELECT headers::text FROM endpoints WHERE id = $1", &[&ep]).await.unwrap();
        let text: String = row.get(0);
        if !text.contains("legacy-header-value") {
            assert!(text.contains("$sealed"), "{text}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still in clear: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(t.get(&format!("/api/v1/app/{a}/endpoint/{ep}/headers")).await["headers"], legacy);
    t.message(&a, "x", json!({})).await;
    let got = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].header("x-legacy"), Some("legacy-header-value"));
}

#[tokio::test]
async fn a_clear_header_named_like_the_marker_is_sent_as_set_and_sealed_rows_are_left_alone() {
    let app = TestApp::spawn_role_default_env(hookgate_gateway::Role::Api).await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let legacy_ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let sealed_ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let db = app.db.client().await;
    // Stored in clear before sealing: `$sealed` is a valid header name.
    let legacy = json!({"$sealed": "clear-dollar-value"});
    db.execute("UPDATE endpoints SET headers = $1 WHERE id = $2", &[&legacy, &legacy_ep]).await.unwrap();
    let path = format!("/api/v1/app/{a}/endpoint/{sealed_ep}/headers");
    let body = json!({"headers": {"X-Kept": "sealed-value"}});
    assert_eq!(t.req(Method::PUT, &path).json(&body).send().await.unwrap().status(), 204);
    let sealed_before: String =
        db.query_one("SELECT headers::text FROM endpoints WHERE id = $1", &[&sealed_ep]).await.unwrap().get(0);
    let legacy_path = format!("/api/v1/app/{a}/endpoint/{legacy_ep}/headers");
    assert_eq!(t.get(&legacy_path).await["headers"], legacy, "read as clear, not as a sealed value");

    let _worker = app.spawn_sibling(hookgate_gateway::Role::Worker).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = db.query_one("SELECT headers::text FROM endpoints WHERE id = $1", &[&legacy_ep]).await.unwrap();
        let text: String = row.get(0);
        if !text.contains("clear-dollar-value") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still in clear: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sealed_after: String =
        db.query_one("SELECT headers::text FROM endpoints WHERE id = $1", &[&sealed_ep]).await.unwrap().get(0);
    assert_eq!(sealed_after, sealed_before, "a sealed row is not sealed again");
    assert_eq!(t.get(&legacy_path).await["headers"], legacy);
    assert_eq!(t.get(&path).await["headers"], json!({"X-Kept": "sealed-value"}));
    t.message(&a, "x", json!({})).await;
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    let dollar: Vec<_> = got.iter().filter_map(|r| r.header("$sealed")).collect();
    assert_eq!(dollar, vec!["clear-dollar-value"], "the clear header is sent as set, once");
    assert_eq!(got.iter().filter_map(|r| r.header("x-kept")).collect::<Vec<_>>(), vec!["sealed-value"]);
}

#[tokio::test]
async fn sealed_headers_under_another_master_key_fail_the_delivery_and_are_never_sent_or_resealed() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/app/{a}/endpoint/{ep}/headers");
    let body = json!({"headers": {"Authorization": "Bearer under-the-old-key"}});
    assert_eq!(t.req(Method::PUT, &path).json(&body).send().await.unwrap().status(), 204);
    // A ciphertext no key here opens, as after a wrong HOOKGATE_MASTER_KEY.
    let foreign = json!({"$sealed": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [7u8; 64])});
    let db = app.db.client().await;
    db.execute("UPDATE endpoints SET headers = $1 WHERE id = $2", &[&foreign, &ep]).await.unwrap();
    let _sibling = app.spawn_sibling(hookgate_gateway::Role::Worker).await;
    t.message(&a, "x", json!({})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(sink.received().is_empty(), "nothing sent without its headers, nor with ciphertext as one");
    let stored: serde_json::Value =
        db.query_one("SELECT headers FROM endpoints WHERE id = $1", &[&ep]).await.unwrap().get(0);
    assert_eq!(stored, foreign, "left as it was for the right key to open");
}
