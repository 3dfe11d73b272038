//! Redis over TLS (`rediss://`): the certificate is checked against the system's
//! roots plus `HOOKGATE_REDIS_CA_FILE`; one it cannot check leaves Redis down
//! (Postgres decides, nothing fails); the redis crate's `#insecure` fragment is
//! the named opt-out.

use hookgate_tests::{certs::TestCerts, redis_cluster::TlsRedis, TestApp};
use serde_json::{json, Value};

async fn redis_state(app: &TestApp) -> Value {
    let res = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), 200, "Redis is never what makes Hookgate unready");
    res.json::<Value>().await.unwrap()["redis"].clone()
}

#[tokio::test]
async fn rediss_with_the_test_ca_file_connects_and_an_unknown_ca_leaves_redis_down() {
    let certs = TestCerts::make();
    let redis = TlsRedis::start(&certs);
    let trusted = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), redis.url());
        env.insert("HOOKGATE_REDIS_CA_FILE".into(), certs.path("ca.crt"));
    })
    .await;
    assert_eq!(redis_state(&trusted).await, json!("up"));
    // Requests run beside it as always.
    let t = trusted.tenant().await;
    t.application().await;

    let untrusted = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), redis.url());
        env.insert("HOOKGATE_REDIS_CA_FILE".into(), certs.path("other-ca.crt"));
    })
    .await;
    assert_eq!(redis_state(&untrusted).await, json!("down"), "a certificate from another CA is refused");
    let t = untrusted.tenant().await;
    t.application().await;

    let insecure = TestApp::spawn_with(|env| {
        env.insert("REDIS_URL".into(), format!("{}#insecure", redis.url()));
    })
    .await;
    assert_eq!(redis_state(&insecure).await, json!("up"), "`#insecure` skips the check, by name");
}
