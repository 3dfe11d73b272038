//! Health, readiness and metrics, and what every response carries.

use std::time::Duration;

use hookgate_tests::{
    servers::{PgServer, RedisServer},
    TestApp,
};
use reqwest::Method;
use serde_json::Value;

async fn readyz(app: &TestApp) -> (u16, Value) {
    let res = app.http.get(app.url("/readyz")).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

#[tokio::test]
async fn readyz_answers_503_while_postgres_is_stopped_and_200_once_it_is_back() {
    let pg = PgServer::start();
    let app = TestApp::spawn_on_server(&pg, "own", |env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "500".into());
    })
    .await;
    assert_eq!(readyz(&app).await, (200, serde_json::json!({"postgres": "up", "redis": "up"})));

    pg.stop();
    let (status, body) = readyz(&app).await;
    assert_eq!(status, 503);
    assert_eq!(body["postgres"], "down");
    let listed = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap();
    assert_eq!(listed.status(), 503, "requests that need Postgres answer 503");

    pg.start_again();
    let mut last = 0;
    for _ in 0..100 {
        last = readyz(&app).await.0;
        if last == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, 200, "ready again without a restart");
    assert_eq!(app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn with_redis_down_readyz_reports_it_and_requests_still_succeed() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let app = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), url);
    })
    .await;
    assert_eq!(readyz(&app).await.1["redis"], "up");
    redis.stop();
    let (status, body) = readyz(&app).await;
    assert_eq!((status, body["redis"].as_str()), (200, Some("down")));
    let t = app.create_tenant("Acme").await;
    assert!(t["apiKey"].is_string());
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    let errors = metric(&metrics, "hookgate_redis_errors_total");
    assert!(errors >= 1.0, "redis errors are counted: {errors}");
    redis.start_again();
    let mut state = String::new();
    for _ in 0..50 {
        state = readyz(&app).await.1["redis"].as_str().unwrap().to_owned();
        if state == "up" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, "up", "reconnects by itself");
}

#[tokio::test]
async fn without_redis_configured_readyz_says_disabled() {
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    assert_eq!(readyz(&app).await, (200, serde_json::json!({"postgres": "up", "redis": "disabled"})));
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

#[tokio::test]
async fn every_response_has_a_request_id_and_errors_are_json() {
    let app = TestApp::spawn().await;
    let ok = app.http.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let id = ok.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(id.starts_with("req_"));

    let missing = app.http.get(app.url("/nowhere")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let other = missing.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_ne!(id, other);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["code"], "not_found");
    assert!(body["detail"].is_string());

    let unauth = app.http.get(app.url("/admin/v1/tenant")).send().await.unwrap();
    assert!(unauth.headers().contains_key("x-request-id"));
    assert_eq!(app.http.get(app.url("/api/v1/health")).send().await.unwrap().status(), 204);
}

#[tokio::test]
async fn metrics_count_requests_by_route_pattern_and_status() {
    let app = TestApp::spawn().await;
    let t = app.create_tenant("Acme").await;
    app.admin(Method::GET, &format!("/admin/v1/tenant/{}", t["id"].as_str().unwrap())).send().await.unwrap();
    let res = app.http.get(app.metrics_url()).send().await.unwrap();
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = res.text().await.unwrap();
    assert!(
        text.contains(r#"hookgate_http_requests_total{route="/admin/v1/tenant/{tenant_id}",status="200"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"hookgate_http_requests_total{route="/admin/v1/tenant",status="201"} 1"#), "{text}");
    assert!(text.contains("hookgate_db_pool_connections{pool=\"main\",state=\"max\"}"), "{text}");
    // Not on the public port: its labels name tenants and sources.
    assert_eq!(app.http.get(app.url("/metrics")).send().await.unwrap().status(), 404);
}

/// The sink horizon's gauge: a transaction left open on the server (here one
/// holding a transaction id) shows as its age, and it falls back once it ends.
#[tokio::test]
async fn an_open_transaction_shows_as_the_sink_horizons_age_until_it_ends() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let gauge = || async {
        let metrics = reqwest::get(app.metrics_url()).await.unwrap().text().await.unwrap();
        metrics
            .lines()
            .find(|l| l.starts_with("hookgate_sink_horizon_age_seconds "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let mut holder = app.db.client().await;
    let tx = holder.transaction().await.unwrap();
    tx.query_one("SELECT pg_current_xact_id()::text", &[]).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if gauge().await.is_some_and(|age| age >= 2.0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the gauge never showed the open transaction");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tx.rollback().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if gauge().await.is_some_and(|age| age < 2.0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the gauge stayed up after the transaction ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The API document follows the role: an ingress process describes its door and
/// serves no page; where the API is served, the page comes with a strict policy and
/// sends nothing to a validator.
#[tokio::test]
async fn the_api_document_and_its_page_follow_the_role_and_the_page_is_locked_down() {
    let app = TestApp::spawn().await;
    let page = app.http.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self';"), "{csp}");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let init = app.http.get(app.url("/docs/swagger-initializer.js")).send().await.unwrap().text().await.unwrap();
    assert!(init.contains("/openapi.json") && init.contains("\"none\""), "no validator badge: {init}");
    // Typed without its slash, the address leads to the page.
    let typed = app.http.get(app.url("/docs")).send().await.unwrap();
    assert_eq!((typed.status().as_u16(), typed.url().path()), (200, "/docs/"));

    let ingress = app.spawn_sibling(hookgate_gateway::Role::Ingress).await;
    assert_eq!(ingress.http.get(ingress.url("/docs/")).send().await.unwrap().status(), 404);
    assert_eq!(ingress.http.get(ingress.url("/docs")).send().await.unwrap().status(), 404);
    let doc: Value = ingress.http.get(ingress.url("/openapi.json")).send().await.unwrap().json().await.unwrap();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.contains_key("/in/{source_id}"));
    assert!(!paths.keys().any(|p| p.starts_with("/api/v1/app") || p.starts_with("/admin/")), "{:?}", paths.keys());
}
