//! Text Postgres cannot store (a NUL, `\u0000`) is bad input: 422 naming the
//! problem, never a 500, and in a batch it fails only its own row.

use hookgate_tests::{app::Tenant, error_text, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

async fn send(t: &Tenant<'_>, method: Method, path: &str, body: Option<Value>) -> (u16, String) {
    let mut req = t.req(method, path);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, error_text(&res.json().await.unwrap_or(Value::Null)))
}

#[tokio::test]
async fn a_nul_in_a_query_or_a_body_answers_422_and_spoils_no_neighbour() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let fields = [
        ("/api/v1/app".to_owned(), json!({"name": "a\u{0}b"}), "`name`"),
        ("/api/v1/app".to_owned(), json!({"name": "x", "metadata": {"k": "a\u{0}b"}}), "`metadata.k`"),
        (
            format!("/api/v1/app/{a}/msg"),
            json!({"eventType": "a.b", "payload": {}, "tags": ["ok", "a\u{0}b"]}),
            "`tags[1]`",
        ),
    ];
    for (path, body, field) in fields {
        let (status, words) = send(&t, Method::POST, &path, Some(body.clone())).await;
        assert_eq!(status, 422, "{path} {body}: {words}");
        assert!(words.contains(field), "{path} {body}: the answer names {field}: {words}");
    }
    let cases = [
        (Method::GET, "/api/v1/app?iterator=a%00b".to_owned(), None),
        (Method::GET, format!("/api/v1/app/{a}/msg?channel=a%00b"), None),
        (Method::POST, "/api/v1/app".to_owned(), Some(json!({"name": "a\u{0}b"}))),
        (Method::POST, "/api/v1/app".to_owned(), Some(json!({"name": "x", "metadata": {"k": "a\u{0}b"}}))),
        (
            Method::POST,
            format!("/api/v1/app/{a}/msg"),
            Some(json!({"eventType": "a.b", "payload": {}, "tags": ["a\u{0}b"]})),
        ),
        (Method::POST, format!("/api/v1/app/{a}/msg"), Some(json!({"eventType": "a\u{0}b", "payload": {}}))),
    ];
    for (method, path, body) in cases {
        let (status, words) = send(&t, method.clone(), &path, body.clone()).await;
        assert_eq!(status, 422, "{method} {path} {body:?}: {words}");
        let named = ["NUL", "a-z A-Z", "`iterator`"].iter().any(|w| words.contains(w));
        assert!(named, "{method} {path}: {words}");
    }
    // A NUL inside a payload is just bytes: kept and delivered as sent.
    let msg = json!({"eventType": "a.b", "payload": {"k": "a\u{0}b"}});
    t.post(&format!("/api/v1/app/{a}/msg"), msg, 202).await;
    // Nothing half-written: the refused application is not there.
    let listed = t.get("/api/v1/app").await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn a_nul_cannot_slip_past_in_a_compressed_or_unparsable_body() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let gz = t
        .req(Method::POST, "/api/v1/app")
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(vec![0x1f, 0x8b, 0x08, 0x00])
        .send()
        .await
        .unwrap();
    assert_eq!(gz.status(), 415, "compressed bodies are refused, not inflated past the check");
    // A lone surrogate inside the payload: the handler would take it, the check cannot parse it.
    let body = r#"{"eventType":"a.b","payload":{"x":"\udc00"},"tags":["a\u0000"]}"#;
    let res = t
        .req(Method::POST, &format!("/api/v1/app/{a}/msg"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let words = error_text(&res.json().await.unwrap());
    assert!(words.contains("u0000"), "{words}");
    let listed = t.get(&format!("/api/v1/app/{a}/msg")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 0, "nothing written: {listed}");
}
