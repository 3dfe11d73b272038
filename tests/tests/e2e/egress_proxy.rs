//! Deliveries and proxies: the process's `HTTP_PROXY`-style variables are ignored
//! (a proxy would resolve names past the SSRF guard), and a proxy the operator
//! configures carries deliveries with the guard still checking every target.
//! Every address here is loopback; the "proxy" is a recording sink.

use std::{collections::HashMap, time::Duration};

use hookgate_gateway::Role;
use hookgate_tests::{app::default_env, process::Served, sink::Sink, TestApp, TestDb};
use serde_json::json;

async fn api_and_worker(worker_env: impl FnOnce(&mut HashMap<String, String>)) -> (TestApp, Served) {
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    // The API may register loopback endpoints beyond the worker's own allow-list.
    env.insert("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), "127.0.0.0/8".into());
    let mut worker = env.clone();
    worker.insert("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), "127.0.0.1/32".into());
    worker_env(&mut worker);
    let served = Served::start(&worker, "worker").await;
    (TestApp::spawn_role(db, env, Role::Api).await, served)
}

#[tokio::test]
async fn the_system_proxy_variables_are_ignored() {
    let (endpoint, proxy) = (Sink::start().await, Sink::start().await);
    let (app, _worker) = api_and_worker(|env| {
        for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
            env.insert(var.into(), proxy.url.clone());
        }
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let port = endpoint.url.rsplit(':').next().unwrap();
    t.endpoint(&a, &format!("http://localhost:{port}/hook"), json!({})).await;
    t.message(&a, "x", json!({})).await;
    endpoint.wait_for(1, Duration::from_secs(15)).await;
    assert!(proxy.received().is_empty(), "a delivery went through the system proxy");
}

#[tokio::test]
async fn a_configured_proxy_carries_deliveries_and_the_guard_still_applies() {
    let (endpoint, proxy) = (Sink::start().await, Sink::start().await);
    let proxy_url = proxy.url.clone();
    let (app, _worker) = api_and_worker(|env| {
        env.insert("HOOKGATE_EGRESS_PROXY".into(), proxy_url);
    })
    .await;
    let t = app.tenant().await;
    let (allowed, refused) = (t.application().await, t.application().await);
    let port = endpoint.url.rsplit(':').next().unwrap();
    t.endpoint(&allowed, &format!("http://localhost:{port}/via-proxy"), json!({})).await;
    // Allowed by the API's list, not by the worker's: the worker refuses it, proxy or not.
    t.endpoint(&refused, "http://127.0.0.2:9/refused", json!({})).await;
    t.message(&allowed, "x", json!({})).await;
    let msg = t.message(&refused, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let got = proxy.wait_for(1, Duration::from_secs(15)).await;
    assert!(got[0].path.ends_with("/via-proxy"), "{}", got[0].path);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let attempt = loop {
        let page = t.get(&format!("/api/v1/app/{refused}/attempt/msg/{msg}")).await;
        if let Some(a) = page["data"].as_array().and_then(|d| d.first()).cloned() {
            break a;
        }
        assert!(std::time::Instant::now() < deadline, "the refused delivery was never attempted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(attempt["response"].as_str().unwrap().contains("not allowed"), "{attempt}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(proxy.received().len(), 1, "only the allowed target went through the proxy");
    assert!(endpoint.received().is_empty(), "the proxy answered, the endpoint was not dialled directly");
}
