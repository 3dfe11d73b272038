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
    // Another application answers as a missing one does (as Svix), before 403.
    assert_eq!(status(Method::GET, format!("/api/v1/app/{other}/endpoint")).await, 404);
    assert_eq!(status(Method::GET, "/api/v1/app".into()).await, 403);
    assert_eq!(status(Method::POST, format!("/api/v1/app/{mine}/msg")).await, 403);
    assert_eq!(status(Method::DELETE, format!("/api/v1/app/{mine}")).await, 403);
    assert_eq!(status(Method::POST, format!("/api/v1/auth/app-portal-access/{mine}")).await, 403);

    // The last two characters changed (a token may end in "00" itself: not that).
    let tail = if token.ends_with("00") { "11" } else { "00" };
    let forged = format!("{}{tail}", &token[..token.len() - 2]);
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

#[tokio::test]
async fn a_portal_token_follows_its_application_not_a_uid_another_takes_over() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let mine = t.post("/api/v1/app", json!({"name": "Mine", "uid": "shop"}), 201).await;
    let mine_id = mine["id"].as_str().unwrap().to_owned();
    let access = t.post("/api/v1/auth/app-portal-access/shop", json!({}), 200).await;
    let token = access["token"].as_str().unwrap().to_owned();
    let status = |p: String| {
        let req = app.api(&token, Method::GET, &p);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("/api/v1/app/shop/endpoint".into()).await, 200, "its uid names it");
    // The uid moves to another application of the same tenant.
    let res = t.req(Method::PATCH, &format!("/api/v1/app/{mine_id}")).json(&json!({"uid": "old-shop"})).send().await;
    assert_eq!(res.unwrap().status(), 200);
    let other = t.post("/api/v1/app", json!({"name": "Other", "uid": "shop"}), 201).await;
    assert_ne!(other["id"], mine["id"]);
    assert_eq!(status("/api/v1/app/shop/endpoint".into()).await, 404, "the uid now names another application");
    assert_eq!(status(format!("/api/v1/app/{mine_id}/endpoint")).await, 200, "its id still names it");
    assert_eq!(status("/api/v1/app/old-shop/endpoint".into()).await, 200, "and so does its new uid");
}

#[tokio::test]
async fn links_and_source_addresses_use_the_public_url_and_not_a_forwarded_host() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PUBLIC_URL".into(), "https://hooks.example.com/".into());
    })
    .await;
    let t = app.tenant().await;
    let mine = t.application().await;
    let access = t
        .req(Method::POST, &format!("/api/v1/auth/app-portal-access/{mine}"))
        .header("X-Forwarded-Host", "evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let url = access["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("https://hooks.example.com/portal/{}/{mine}#key=", t.id)), "{url}");
    let source = t.stripe_source(&mine, "whsec_test", json!({})).await;
    let got = t.get(&format!("/api/v1/source/{source}")).await;
    assert_eq!(got["url"], format!("https://hooks.example.com/in/{source}"));
}

#[tokio::test]
async fn a_forwarded_host_counts_only_from_a_trusted_proxy() {
    let portal_url = |app: &TestApp, key: String, mine: String| {
        let req = app.api(&key, Method::POST, &format!("/api/v1/auth/app-portal-access/{mine}"));
        async move {
            let req = req.header("X-Forwarded-Host", "evil.example").header("X-Forwarded-Proto", "https");
            let got: serde_json::Value = req.json(&json!({})).send().await.unwrap().json().await.unwrap();
            got["url"].as_str().unwrap().to_owned()
        }
    };
    // Without HOOKGATE_PUBLIC_URL and from a peer that is no proxy: the Host header.
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let mine = t.application().await;
    let url = portal_url(&app, t.key.clone(), mine.clone()).await;
    assert!(url.starts_with("http://127.0.0.1:"), "a caller does not choose the link's host: {url}");
    // From a trusted proxy (the tests' loopback): the forwarded host and scheme.
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_TRUSTED_PROXIES".into(), "127.0.0.0/8".into());
    })
    .await;
    let t = app.tenant().await;
    let mine = t.application().await;
    let url = portal_url(&app, t.key.clone(), mine.clone()).await;
    assert!(url.starts_with("https://evil.example/portal/"), "a proxy's forwarded host is believed: {url}");
}
