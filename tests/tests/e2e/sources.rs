//! The sources API: what a tenant configures is what it reads back, and a PATCH
//! changes only what it names.

use reqwest::Method;
use serde_json::{json, Value};

use hookgate_tests::TestApp;

#[tokio::test]
async fn a_source_shows_its_hmac_header_as_given() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let body = json!({"name": "h", "provider": "hmac", "secret": "s3cret", "appId": a,
        "hmac": {"header": "X-Signature"}});
    let s = t.post("/api/v1/source", body, 201).await;
    assert_eq!(s["hmac"]["header"], "X-Signature", "{s}");
}

#[tokio::test]
async fn a_source_patch_keeps_what_it_does_not_name() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let body = json!({"name": "h", "provider": "hmac", "secret": "s3cret", "appId": a, "mode": "sync",
        "hmac": {"header": "x-sig", "algorithm": "sha512", "encoding": "base64", "prefix": "v1="},
        "allowUnverified": true, "idempotency": {"fields": ["/a", "/b"]}, "eventTypePath": "/t"});
    let s = t.post("/api/v1/source", body, 201).await;
    let id = s["id"].as_str().unwrap();
    let res = t.req(Method::PATCH, &format!("/api/v1/source/{id}")).json(&json!({"name": "renamed"})).send().await;
    let p: Value = res.unwrap().json().await.unwrap();
    for k in ["hmac", "allowUnverified", "idempotency", "mode", "eventTypePath", "retention", "appId"] {
        assert_eq!(p[k], s[k], "{k}: {p}");
    }
    let res = t.req(Method::PATCH, &format!("/api/v1/source/{id}")).json(&json!({"idempotency": null})).send().await;
    let p: Value = res.unwrap().json().await.unwrap();
    assert_eq!(p["idempotency"], Value::Null, "{p}");
    assert_eq!(p["hmac"], s["hmac"]);
}
