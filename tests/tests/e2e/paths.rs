//! Paths are parsed at the edge: served as Svix serves them (trailing slash
//! trimmed), ids typed before any query, and a malformed one answered with words.

use hookgate_tests::{error_text, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn a_trailing_slash_reaches_the_same_route_as_svix_serves_it() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    // Older Svix SDKs and many hand-written clients post to `/msg/`.
    let sent = t.post(&format!("/api/v1/app/{a}/msg/"), json!({"eventType": "a.b", "payload": {"x": 1}}), 202).await;
    let id = sent["id"].as_str().unwrap();
    let got = t.get(&format!("/api/v1/app/{a}/msg/{id}/")).await;
    assert_eq!(got["id"], sent["id"]);
    assert_eq!(t.get("/api/v1/app/").await["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_application_is_named_by_its_id_or_its_uid() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let created = t.post("/api/v1/app", json!({"name": "A", "uid": "shop-1.eu"}), 201).await;
    assert_eq!(t.get("/api/v1/app/shop-1.eu").await["id"], created["id"]);
    let id = created["id"].as_str().unwrap();
    assert_eq!(t.get(&format!("/api/v1/app/{id}")).await["uid"], "shop-1.eu");
}

async fn refused(t: &hookgate_tests::app::Tenant<'_>, method: Method, path: &str) -> (u16, String) {
    let res = t.req(method, path).json(&json!({})).send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, error_text(&body))
}

#[tokio::test]
async fn a_malformed_path_id_answers_422_naming_what_was_expected() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    // Neither an id nor a uid: a NUL, a space, a slash-free junk value.
    for bad in ["a%00b", "a%20b", "%E2%9C%93"] {
        let (status, words) = refused(&t, Method::GET, &format!("/api/v1/app/{bad}")).await;
        assert_eq!(status, 422, "{bad}: {words}");
        assert!(words.contains("neither an id nor a uid"), "{bad}: {words}");
    }
    // Id-only segments: the prefix is named.
    let (status, words) = refused(&t, Method::GET, "/api/v1/source/app_nope/event").await;
    assert_eq!(status, 422, "{words}");
    assert!(words.contains("src_"), "{words}");
    let (status, words) = refused(&t, Method::GET, &format!("/api/v1/app/{a}/msg/msg_1/attempt/bogus")).await;
    assert_eq!(status, 422, "{words}");
    assert!(words.contains("atmpt_"), "{words}");
    let (status, words) = refused(&t, Method::GET, "/api/v1/event-type/a%00b").await;
    assert_eq!(status, 422, "{words}");
    assert!(words.contains("event type"), "{words}");
}

#[tokio::test]
async fn a_well_formed_id_that_names_nothing_answers_404() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let (status, words) = refused(&t, Method::GET, "/api/v1/app/app_01ARZ3NDEKTSV4RRFFQ69G5FAV").await;
    assert_eq!((status, words.as_str()), (404, "application not found"));
    // The provider-facing door: a malformed source id is no source.
    for id in ["nope", "src_nope", "a%00b"] {
        let res = reqwest::Client::new().post(app.url(&format!("/in/{id}"))).body("{}").send().await.unwrap();
        assert_eq!(res.status(), 404, "/in/{id}");
    }
}

async fn send(t: &hookgate_tests::app::Tenant<'_>, method: Method, path: &str, body: Value) -> (u16, Value) {
    let res = t.req(method, path).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_put_to_a_uid_that_merely_starts_like_an_application_id_creates_it() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    for uid in ["apple", "appointments-eu"] {
        let (status, body) = send(&t, Method::PUT, &format!("/api/v1/app/{uid}"), json!({"name": uid})).await;
        assert_eq!(status, 201, "PUT /api/v1/app/{uid}: {}", error_text(&body));
        assert_eq!(body["uid"], uid);
    }
    // A uid that does not start with `app` is upserted, as before.
    let (status, _) = send(&t, Method::PUT, "/api/v1/app/shop", json!({"name": "shop"})).await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn a_put_to_a_uid_that_merely_starts_like_an_endpoint_id_creates_it() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    for uid in ["epic-hook", "eps"] {
        let body = json!({"url": "http://127.0.0.1:9/hook"});
        let (status, got) = send(&t, Method::PUT, &format!("/api/v1/app/{a}/endpoint/{uid}"), body).await;
        assert_eq!(status, 201, "PUT endpoint {uid}: {}", error_text(&got));
        assert_eq!(got["uid"], uid);
    }
}

#[tokio::test]
async fn an_inline_application_on_an_id_shaped_path_is_refused_and_nothing_is_made() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    // An id is never chosen by a caller, and Svix makes an inline application only
    // under the path's uid: 422, as Svix answers, and no application.
    for application in [json!({"name": "X"}), json!({"name": "X", "uid": "app_x"})] {
        let body = json!({"eventType": "a.b", "payload": {}, "application": application});
        t.post("/api/v1/app/app_x/msg", body, 422).await;
    }
    let listed = t.get("/api/v1/app").await;
    assert_eq!(listed["data"], json!([]), "{listed}");
}

#[tokio::test]
async fn hostile_path_segments_answer_4xx_and_never_reach_a_query() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let long = "x".repeat(257);
    let paths = [
        format!("/api/v1/app/{long}"),
        "/api/v1/app/%C3%A9".to_owned(),
        "/api/v1/app/a%2Fb".to_owned(),
        format!("/api/v1/app/{a}/endpoint/a%2F..%2Fb"),
        format!("/api/v1/app/{a}/msg/%FF"),
        "/api/v1/source/src_%00/event".to_owned(),
        "/api/v1/event-type/%E2%80%AE".to_owned(),
    ];
    for p in &paths {
        let res = t.req(Method::GET, p).send().await.unwrap();
        let s = res.status().as_u16();
        assert!((400..500).contains(&s), "{p}: {s}");
    }
}
