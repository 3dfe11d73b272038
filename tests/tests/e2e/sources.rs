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

#[tokio::test]
async fn a_provider_keyed_by_its_own_id_only_refuses_another_rule_and_a_provider_that_checks_its_url_first_is_an_ingest_source(
) {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    // PayPal: its body is covered by a CRC32 alone, so its key is the signed transmission id only.
    let ruled = json!({"name": "p", "provider": "paypal", "secret": "8PT597110X687430LKGECATA", "appId": a,
        "idempotency": {"jsonPointer": "/id"}});
    let res = t.req(Method::POST, "/api/v1/source").json(&ruled).send().await.unwrap();
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    assert!(
        hookgate_tests::error_text(&body)
            .contains("`idempotency`: a paypal source is keyed by its signed transmission id"),
        "{body}"
    );
    let s = t
        .post(
            "/api/v1/source",
            json!({"name": "p", "provider": "paypal", "secret": "8PT597110X687430LKGECATA", "appId": a}),
            201,
        )
        .await;
    assert_eq!(s["idempotency"], Value::Null, "{s}");
    // Meta and Adobe Sign check the URL with a GET first: only an ingest source's URL answers it.
    for provider in ["meta", "adobe-sign"] {
        let body = json!({"name": "m", "provider": provider, "secret": "s3cret-value", "appId": a});
        let res = t.req(Method::POST, "/api/v1/source").json(&body).send().await.unwrap();
        assert_eq!(res.status(), 422, "{provider}");
        let body: Value = res.json().await.unwrap();
        assert!(hookgate_tests::error_text(&body).contains("create it as an ingest source"), "{provider}: {body}");
    }
}
