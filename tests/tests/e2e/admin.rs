//! The operator's admin API, `/admin/v1`: authentication, tenants, API keys.

use hookgate_tests::{error_text, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn a_missing_or_wrong_admin_token_answers_401() {
    let app = TestApp::spawn().await;
    let none = app.http.get(app.url("/admin/v1/tenant")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let body: Value = none.json().await.unwrap();
    assert_eq!(body["code"], "authentication_failed");
    assert!(body["detail"].as_str().unwrap().contains("Authorization"), "{body}");

    let wrong =
        app.http.get(app.url("/admin/v1/tenant")).bearer_auth("test-admin-token-0123456780").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let ok = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_tenant_api_key_is_not_an_admin_token() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    let res = app.api(t["apiKey"].as_str().unwrap(), Method::GET, "/admin/v1/tenant").send().await.unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn without_an_admin_token_configured_the_admin_api_is_closed() {
    let app = TestApp::spawn_with(|env| {
        env.remove("HOOKGATE_ADMIN_TOKEN");
    })
    .await;
    let res = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap();
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("HOOKGATE_ADMIN_TOKEN"), "{body}");
}

#[tokio::test]
async fn creating_a_tenant_returns_its_key_once_and_later_reads_do_not() {
    let app = TestApp::spawn().await;
    let res =
        app.admin(Method::POST, "/admin/v1/tenant").json(&json!({"name": "Acme", "uid": "acme"})).send().await.unwrap();
    assert_eq!(res.status(), 201);
    let t: Value = res.json().await.unwrap();
    let id = t["id"].as_str().unwrap();
    assert!(id.starts_with("tnt_"), "{t}");
    assert_eq!(t["name"], "Acme");
    assert_eq!(t["uid"], "acme");
    assert!(t["apiKey"].as_str().unwrap().starts_with("hgk_"), "{t}");
    assert!(t["createdAt"].is_string());

    for path in [format!("/admin/v1/tenant/{id}"), "/admin/v1/tenant/acme".to_owned()] {
        let got: Value = app.admin(Method::GET, &path).send().await.unwrap().json().await.unwrap();
        assert_eq!(got["id"], id, "{path}");
        assert!(got.get("apiKey").is_none(), "the key is shown only at creation: {got}");
    }
}

#[tokio::test]
async fn tenant_fields_are_validated_with_a_message_naming_the_field() {
    let app = TestApp::spawn().await;
    for (body, field) in
        [(json!({"name": ""}), "name"), (json!({"name": "A", "uid": "has space"}), "uid"), (json!({"nam": "A"}), "nam")]
    {
        let res = app.admin(Method::POST, "/admin/v1/tenant").json(&body).send().await.unwrap();
        assert_eq!(res.status(), 422, "{body}");
        let err: Value = res.json().await.unwrap();
        assert!(error_text(&err).contains(field), "{err}");
    }
    let res = app
        .admin(Method::POST, "/admin/v1/tenant")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let listed: Value = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 0, "nothing half-written: {listed}");
}

#[tokio::test]
async fn a_duplicate_uid_answers_409() {
    let app = TestApp::spawn().await;
    let body = json!({"name": "A", "uid": "same"});
    assert_eq!(app.admin(Method::POST, "/admin/v1/tenant").json(&body).send().await.unwrap().status(), 201);
    let res = app.admin(Method::POST, "/admin/v1/tenant").json(&body).send().await.unwrap();
    assert_eq!(res.status(), 409);
}

#[tokio::test]
async fn tenants_list_in_pages_with_an_iterator() {
    let app = TestApp::spawn().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(app.create_tenant(&format!("T{i}")).await["id"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut iterator: Option<String> = None;
    loop {
        let path = match &iterator {
            Some(it) => format!("/admin/v1/tenant?limit=2&iterator={it}"),
            None => "/admin/v1/tenant?limit=2".to_owned(),
        };
        let page: Value = app.admin(Method::GET, &path).send().await.unwrap().json().await.unwrap();
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(data.iter().map(|t| t["id"].as_str().unwrap().to_owned()));
        if page["done"].as_bool().unwrap() {
            break;
        }
        iterator = Some(page["iterator"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen, ids, "every tenant once, in creation order");
}

#[tokio::test]
async fn patching_and_deleting_a_tenant() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Old").await;
    let path = format!("/admin/v1/tenant/{}", t["id"].as_str().unwrap());
    let patched: Value =
        app.admin(Method::PATCH, &path).json(&json!({"name": "New"})).send().await.unwrap().json().await.unwrap();
    assert_eq!(patched["name"], "New");
    assert_eq!(patched["disabled"], false);
    assert_eq!(app.admin(Method::DELETE, &path).send().await.unwrap().status(), 204);
    assert_eq!(app.admin(Method::GET, &path).send().await.unwrap().status(), 404);
    assert_eq!(app.admin(Method::DELETE, &path).send().await.unwrap().status(), 404);
    assert_eq!(app.admin(Method::GET, "/admin/v1/tenant/tnt_nope").send().await.unwrap().status(), 404);
}
