//! Tenant API keys: stored only as hashes, revocable, and confined to their tenant.

use hookgate_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

async fn create_app(app: &TestApp, key: &str, name: &str) -> Value {
    let res = app.api(key, Method::POST, "/api/v1/app").json(&json!({ "name": name })).send().await.unwrap();
    assert_eq!(res.status(), 201);
    res.json().await.unwrap()
}

#[tokio::test]
async fn the_database_holds_no_api_key_in_clear() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    let key = t["apiKey"].as_str().unwrap();
    let secret = key.rsplit_once('_').unwrap().1;
    let db = app.db.client().await;
    // Every row of every table of ours, as text: the key must appear nowhere.
    let tables = db.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", &[]).await.unwrap();
    assert!(tables.len() >= 3);
    for t in tables {
        let name: String = t.get(0);
        let rows = db.query(&format!("SELECT t::text FROM {name} t"), &[]).await.unwrap();
        for r in rows {
            let text: String = r.get(0);
            assert!(!text.contains(secret), "table {name} holds the key: {text}");
            assert!(!text.contains(&hex_of(secret)), "table {name} holds the key's bytes");
        }
    }
    let hashes: i64 = db.query_one("SELECT count(*) FROM api_keys", &[]).await.unwrap().get(0);
    assert_eq!(hashes, 1);
}

fn hex_of(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_tenants_key_used_on_another_tenants_id_answers_404() {
    let app = TestApp::spawn().await;
    let a = app.create_tenant("A").await;
    let b = app.create_tenant("B").await;
    let (ka, kb) = (a["apiKey"].as_str().unwrap(), b["apiKey"].as_str().unwrap());
    let app_b = create_app(&app, kb, "B's app").await;
    let path = format!("/api/v1/app/{}", app_b["id"].as_str().unwrap());

    let foreign = app.api(ka, Method::GET, &path).send().await.unwrap();
    assert_eq!(foreign.status(), 404);
    let missing = app.api(ka, Method::GET, "/api/v1/app/app_01JAAAAAAAAAAAAAAAAAAAAAAA").send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let (fb, mb): (Value, Value) = (foreign.json().await.unwrap(), missing.json().await.unwrap());
    assert_eq!(fb, mb, "a foreign id is indistinguishable from a missing one");

    for method in [Method::DELETE, Method::PATCH] {
        let res = app.api(ka, method.clone(), &path).json(&json!({})).send().await.unwrap();
        assert_eq!(res.status(), 404, "{method}");
    }
    let listed: Value = app.api(ka, Method::GET, "/api/v1/app").send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 0);
    assert_eq!(app.api(kb, Method::GET, &path).send().await.unwrap().status(), 200, "B still sees its app");
}

#[tokio::test]
async fn a_revoked_key_stops_working_and_a_new_one_works() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    let id = t["id"].as_str().unwrap();
    let old = t["apiKey"].as_str().unwrap();
    assert_eq!(app.api(old, Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);

    let res = app.admin(Method::POST, &format!("/admin/v1/tenant/{id}/api-key")).send().await.unwrap();
    assert_eq!(res.status(), 201);
    let new: Value = res.json().await.unwrap();
    let new_key = new["apiKey"].as_str().unwrap();

    let revoke = format!("/admin/v1/tenant/{id}/api-key/{}", t["apiKeyId"].as_str().unwrap());
    assert_eq!(app.admin(Method::DELETE, &revoke).send().await.unwrap().status(), 204);
    assert_eq!(app.admin(Method::DELETE, &revoke).send().await.unwrap().status(), 404);
    assert_eq!(app.api(old, Method::GET, "/api/v1/app").send().await.unwrap().status(), 401);
    assert_eq!(app.api(new_key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_disabled_or_deleted_tenants_keys_stop_working() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    let path = format!("/admin/v1/tenant/{}", t["id"].as_str().unwrap());
    let key = t["apiKey"].as_str().unwrap();

    app.admin(Method::PATCH, &path).json(&json!({"disabled": true})).send().await.unwrap();
    assert_eq!(app.api(key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 401);
    app.admin(Method::PATCH, &path).json(&json!({"disabled": false})).send().await.unwrap();
    assert_eq!(app.api(key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);
    app.admin(Method::DELETE, &path).send().await.unwrap();
    assert_eq!(app.api(key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 401);
}

#[tokio::test]
async fn malformed_or_unknown_keys_answer_401_with_a_reason() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    let key = t["apiKey"].as_str().unwrap();
    let mut forged = key.to_owned();
    forged.replace_range(forged.len() - 4.., "0000");
    for bad in ["", "nope", forged.as_str()] {
        let res = app.api(bad, Method::GET, "/api/v1/app").send().await.unwrap();
        assert_eq!(res.status(), 401, "{bad:?}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], "authentication_failed");
    }
    let none = app.http.get(app.url("/api/v1/app")).send().await.unwrap();
    assert_eq!(none.status(), 401);
}

#[tokio::test]
async fn a_key_in_an_idempotent_replay_is_sealed_at_rest_and_replayed_whole() {
    let app = TestApp::spawn().await;
    let create = || {
        app.admin(Method::POST, "/admin/v1/tenant")
            .header("Idempotency-Key", "create-acme")
            .json(&json!({"name": "Acme"}))
    };
    let first = create().send().await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let key = first["apiKey"].as_str().unwrap();
    let secret = key.rsplit_once('_').unwrap().1;
    let db = app.db.client().await;
    let rows = db.query("SELECT t::text FROM idempotency_keys t", &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
    for r in rows {
        let text: String = r.get(0);
        assert!(!text.contains(secret) && !text.contains(&hex_of(secret)), "the replay holds the key: {text}");
    }
    let again = create().send().await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["apiKey"], first["apiKey"], "the replay is the first answer, whole");
}

#[tokio::test]
async fn revoking_a_key_revokes_the_portal_tokens_it_minted_and_only_those() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Leaky").await;
    let id = t["id"].as_str().unwrap();
    let leaked = t["apiKey"].as_str().unwrap();
    let res = app.admin(Method::POST, &format!("/admin/v1/tenant/{id}/api-key")).send().await.unwrap();
    let other: Value = res.json().await.unwrap();
    let other = other["apiKey"].as_str().unwrap();
    let made = create_app(&app, leaked, "a").await;
    let app_id = made["id"].as_str().unwrap();
    let mint = |key: &str| {
        let req = app.api(key, Method::POST, &format!("/api/v1/auth/app-portal-access/{app_id}"));
        async move {
            let got: Value = req.json(&json!({"expiry": 2_592_000})).send().await.unwrap().json().await.unwrap();
            got["token"].as_str().unwrap().to_owned()
        }
    };
    let (by_leaked, by_other) = (mint(leaked).await, mint(other).await);
    let reads = |token: String| {
        let req = app.api(&token, Method::GET, &format!("/api/v1/app/{app_id}/endpoint"));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!((reads(by_leaked.clone()).await, reads(by_other.clone()).await), (200, 200));
    let revoke = format!("/admin/v1/tenant/{id}/api-key/{}", t["apiKeyId"].as_str().unwrap());
    assert_eq!(app.admin(Method::DELETE, &revoke).send().await.unwrap().status(), 204);
    assert_eq!(reads(by_leaked).await, 401, "a 30-day token dies with the key that minted it");
    assert_eq!(reads(by_other).await, 200, "tokens of the tenant's other keys live on");
}
