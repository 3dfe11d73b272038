//! What a tenant sends is bounded in what it costs the server: documents that
//! expand (YAML aliases, OpenAPI `$ref`s) are charged in bytes, measured on a
//! real process's peak memory.

use hookgate_tests::{app::TestApp, process::Served};
use reqwest::Method;
use serde_json::{json, Value};

/// An OpenAPI document of about 100 KB whose one webhook's schema names a
/// 90 KB string through `levels` layers of four references each: 4^levels
/// copies once inlined (4,096 copies, 370 MB, at 6 levels).
fn reference_bomb(levels: usize) -> Value {
    let mut schemas = serde_json::Map::new();
    schemas.insert("L0".into(), json!({ "description": "x".repeat(90_000) }));
    for i in 1..=levels {
        let r = json!({ "$ref": format!("#/components/schemas/L{}", i - 1) });
        schemas.insert(format!("L{i}"), json!({ "allOf": [r, r, r, r] }));
    }
    let top = json!({ "$ref": format!("#/components/schemas/L{levels}") });
    json!({
        "openapi": "3.1.0",
        "webhooks": { "bomb.went.off": { "post": { "requestBody": { "content": {
            "application/json": { "schema": top } } } } } },
        "components": { "schemas": schemas }
    })
}

#[tokio::test]
async fn a_100_kb_openapi_document_whose_references_expand_to_gigabytes_is_refused_within_a_few_mb() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let served = Served::start(&app.env, "api").await;
    let import = |spec: Value| {
        app.http
            .post(served.url("/api/v1/event-type/import/openapi"))
            .bearer_auth(&t.key)
            .json(&json!({ "spec": spec, "dryRun": true }))
            .send()
    };
    // A plain document first, so the peak below is the bomb's alone.
    let plain = import(reference_bomb(0)).await.unwrap();
    assert_eq!(plain.status(), 200);
    let before = served.peak_rss_mb();
    let bomb = reference_bomb(6);
    let size = bomb.to_string().len();
    assert!((90_000..110_000).contains(&size), "the document is about 100 KB: {size}");
    let answer = import(bomb).await.unwrap();
    let status = answer.status();
    let body = answer.bytes().await.unwrap();
    let grown = served.peak_rss_mb() - before;
    assert_eq!(
        status,
        422,
        "refused as too large once expanded (grew by {grown:.0} MB, answered {} bytes)",
        body.len()
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(body["detail"].to_string().contains("expands to more than"), "{body}");
    // Before the budget counted bytes this grew the server by about 700 MB
    // (4,096 copies of the string, then the answer that listed them).
    assert!(grown < 64.0, "the server's peak memory grew by {grown:.0} MB");
    // And the server is still there for everyone else.
    let health = app.http.get(served.url("/api/v1/health")).send().await.unwrap();
    assert!(health.status().is_success());
    let apps = t.req(Method::GET, "/api/v1/app").send().await.unwrap();
    assert_eq!(apps.status(), 200);
}

#[tokio::test]
async fn many_bodies_that_grow_a_hundredfold_when_parsed_are_read_two_at_a_time_within_their_budget() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let served = Served::start(&app.env, "api").await;
    // 1 MiB of `{"k":0}`: 7 bytes of text an object, about 850 bytes once parsed
    // (some 110 MiB). Parsed as a `web::Json` before the import's turn, eight
    // at once held about 8 x 84 MiB.
    let objects = vec![r#"{"k":0}"#; 130_000].join(",");
    let body = format!(r#"{{"spec": {{"webhooks": {{}}, "x": [{objects}]}}, "dryRun": true}}"#);
    assert!(body.len() < 1 << 20, "under the body limit: {}", body.len());
    let warm = app.http.post(served.url("/api/v1/event-type/import/openapi")).bearer_auth(&t.key);
    let warm = warm.json(&json!({"spec": {"openapi": "3.1.0", "webhooks": {}}, "dryRun": true})).send().await.unwrap();
    assert_eq!(warm.status(), 200);
    let before = served.peak_rss_mb();
    let sent: Vec<_> = (0..8)
        .map(|_| {
            let req = app.http.post(served.url("/api/v1/event-type/import/openapi")).bearer_auth(&t.key);
            tokio::spawn(req.header("content-type", "application/json").body(body.clone()).send())
        })
        .collect();
    let mut answers = Vec::new();
    for s in sent {
        let answer = s.await.unwrap().unwrap();
        answers.push((answer.status().as_u16(), answer.text().await.unwrap()));
    }
    let grown = served.peak_rss_mb() - before;
    eprintln!("eight 1 MiB bodies at once grew the server's peak by {grown:.0} MB");
    for (status, text) in answers {
        // Refused when its budget runs out, or asked to come back when others hold the turns.
        assert!(
            (status == 422 && text.contains("expands to more than 32 MiB")) || status == 429,
            "{status}: {}",
            &text[..text.len().min(300)]
        );
    }
    // Before, each was parsed whole before the handler ran, eight at once, and accepted.
    assert!(grown < 150.0, "the server's peak memory grew by {grown:.0} MB");
}
