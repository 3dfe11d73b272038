//! App-portal access: a token confined to one application.

use hookgate_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn a_portal_token_reaches_only_its_own_application() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let mine = t.application().await;
    let other = t.application().await;
    let access = t.post(&format!("/api/v1/auth/app-portal-access/{mine}"), json!({}), 200).await;
    let token = access["token"].as_str().unwrap();
    assert!(access["url"].as_str().unwrap().contains(token));

    let status = |m: Method, p: String| {
        let req = app.api(token, m, &p).json(&json!({"url": "http://127.0.0.1:9/hook"}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(Method::GET, format!("/api/v1/app/{mine}")).await, 200);
    assert_eq!(status(Method::POST, format!("/api/v1/app/{mine}/endpoint")).await, 201);
    assert_eq!(status(Method::GET, format!("/api/v1/app/{mine}/endpoint")).await, 200);
    assert_eq!(status(Method::GET, format!("/api/v1/app/{other}/endpoint")).await, 403);
    assert_eq!(status(Method::GET, "/api/v1/app".into()).await, 403);
    assert_eq!(status(Method::POST, format!("/api/v1/app/{mine}/msg")).await, 403);
    assert_eq!(status(Method::DELETE, format!("/api/v1/app/{mine}")).await, 403);
    assert_eq!(status(Method::POST, format!("/api/v1/auth/app-portal-access/{mine}")).await, 403);

    let forged = format!("{}00", &token[..token.len() - 2]);
    assert_eq!(app.api(&forged, Method::GET, &format!("/api/v1/app/{mine}")).send().await.unwrap().status(), 401);
}

#[tokio::test]
async fn a_portal_token_stops_working_when_its_tenant_is_disabled() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let mine = t.application().await;
    let access = t.post(&format!("/api/v1/auth/app-portal-access/{mine}"), json!({}), 200).await;
    let token = access["token"].as_str().unwrap();
    app.admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
        .json(&json!({"disabled": true}))
        .send()
        .await
        .unwrap();
    let res = app.api(token, Method::GET, &format!("/api/v1/app/{mine}")).send().await.unwrap();
    assert_eq!(res.status(), 401);
}
