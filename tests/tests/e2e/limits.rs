//! Configured limits hold, also under concurrency: endpoints per application
//! (which bounds the fan-out of every message).

use futures_util::future::join_all;
use hookgate_tests::{error_text, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn an_application_takes_no_more_endpoints_than_the_cap_even_when_they_race() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_MAX_ENDPOINTS_PER_APP".into(), "3".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let create = |i: usize| {
        let req = t.req(Method::POST, &format!("/api/v1/app/{a}/endpoint"));
        async move {
            let res = req.json(&json!({"url": format!("http://127.0.0.1:9/{i}")})).send().await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap())
        }
    };
    let results = join_all((0..10).map(create)).await;
    let created = results.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 3, "{results:?}");
    let refused = results.iter().find(|(s, _)| *s == 422).expect("the others are refused");
    assert!(error_text(&refused.1).contains("HOOKGATE_MAX_ENDPOINTS_PER_APP"), "{}", refused.1);
    let listed = t.get(&format!("/api/v1/app/{a}/endpoint")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 3);
    // Another application has its own allowance.
    let b = t.application().await;
    t.endpoint(&b, "http://127.0.0.1:9/b", json!({})).await;
}
