//! Postgres over TLS, as libpq reads `DATABASE_URL`: `verify-full` against a CA
//! made by the test connects and encrypts every connection; a certificate from
//! another CA fails the start naming the setting; `sslmode=disable` against a
//! server that takes TLS only is refused; a client certificate (`sslcert`,
//! `sslkey`) opens what requires one.

use std::time::Duration;

use hookgate_tests::{app::default_env, certs::TestCerts, process::hookgate, servers::PgServer, TestApp, TestDb};

async fn migrate(url: &str) -> std::process::Output {
    let cmd = hookgate(&[
        ("DATABASE_URL", url),
        ("HOOKGATE_MASTER_KEY", &hookgate_shared::crypto::MasterKey::generate_base64()),
    ])
    .arg("migrate")
    .output();
    tokio::time::timeout(Duration::from_secs(30), cmd).await.expect("migrate ends").unwrap()
}

#[tokio::test]
async fn verify_full_against_the_test_ca_connects_and_every_connection_is_encrypted() {
    let certs = TestCerts::make();
    let pg = PgServer::start_tls(&certs);
    let url = format!("{}?sslmode=verify-full&sslrootcert={}", pg.url(), certs.path("ca.crt"));
    let out = migrate(&url).await;
    assert!(out.status.success(), "migrate over TLS: {}", String::from_utf8_lossy(&out.stderr));
    let db = TestDb::on("pgtls", &url);
    let env = default_env(&db);
    let app = TestApp::spawn_on(db, env).await;
    let t = app.tenant().await;
    t.application().await;

    let (client, conn) = hookgate_shared::db::connect(&url, std::time::Duration::from_secs(5)).await.unwrap();
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name LIKE 'hookgate/%' OR a.pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert!(rows.len() >= 2, "the app's connections and ours: {}", rows.len());
    assert!(rows.iter().all(|r| r.get::<_, bool>(0)), "every connection is encrypted");
}

#[tokio::test]
async fn a_certificate_from_another_ca_fails_the_start_naming_the_setting() {
    let certs = TestCerts::make();
    let pg = PgServer::start_tls(&certs);
    let url = format!("{}?sslmode=verify-full&sslrootcert={}", pg.url(), certs.path("other-ca.crt"));
    let key = hookgate_shared::crypto::MasterKey::generate_base64();
    let serve = hookgate(&[("DATABASE_URL", &url), ("HOOKGATE_MASTER_KEY", &key), ("HOOKGATE_LISTEN", "127.0.0.1:0")])
        .args(["serve", "--role", "api"])
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), serve).await.expect("serve gives up at start").unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sslmode=verify-full") && err.contains("sslrootcert"), "{err}");
    // A file that is not there is named before any connection is tried.
    let missing = format!("{}?sslmode=verify-ca&sslrootcert=/nonexistent/root.crt", pg.url());
    let err = String::from_utf8_lossy(&migrate(&missing).await.stderr).into_owned();
    assert!(err.contains("sslrootcert `/nonexistent/root.crt`"), "{err}");
}

#[tokio::test]
async fn sslmode_disable_is_refused_by_a_server_that_takes_tls_only() {
    let certs = TestCerts::make();
    let pg = PgServer::start_tls(&certs);
    let out = migrate(&format!("{}?sslmode=disable", pg.url())).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no encryption"), "Postgres's own refusal is shown: {err}");
    // `require` without a root certificate encrypts without checking, as libpq does.
    let out = migrate(&format!("{}?sslmode=require", pg.url())).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn a_client_certificate_opens_a_role_that_requires_one() {
    let certs = TestCerts::make();
    let pg = PgServer::start_tls(&certs);
    let base = pg.url().replace("hookgate@", "certuser@");
    let without = format!("{base}?sslmode=verify-full&sslrootcert={}", certs.path("ca.crt"));
    let out = migrate(&without).await;
    assert!(!out.status.success(), "certuser needs a client certificate");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client certificate"), "{err}");
    let with = format!("{without}&sslcert={}&sslkey={}", certs.path("client.crt"), certs.path("client.key"));
    let out = migrate(&with).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A Postgres destination over TLS: `sslmode=verify-full` with the CA given as
/// `sslRootCert` delivers every message, encrypted; the same server's
/// certificate checked against another CA is refused, each attempt saying why,
/// and writes nothing.
#[tokio::test]
async fn a_postgres_destination_verifies_its_servers_certificate_against_the_ca_it_was_given() {
    use reqwest::Method;
    use serde_json::json;

    let certs = TestCerts::make();
    let pg = PgServer::start_tls(&certs);
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let pem = |name: &str| std::fs::read_to_string(certs.path(name)).unwrap();
    let url = format!("{}?sslmode=verify-full", pg.url());
    let trusted = t
        .post(
            &format!("/api/v1/app/{a}/destination"),
            json!({"type": "postgres", "config": {"url": url, "tableName": "hooks", "sslRootCert": pem("ca.crt")}}),
            201,
        )
        .await;
    assert_eq!(trusted["type"], "postgres");
    let wrong = t
        .post(
            &format!("/api/v1/app/{a}/destination"),
            json!({"type": "postgres", "config": {"url": url, "tableName": "wrong", "sslRootCert": pem("other-ca.crt")}}),
            201,
        )
        .await;
    for i in 0..2 {
        t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "a.b", "payload": {"i": i}}), 202).await;
    }

    let reader_url = format!("{url}&sslrootcert={}", certs.path("ca.crt"));
    let (reader, conn) = hookgate_shared::db::connect(&reader_url, std::time::Duration::from_secs(5)).await.unwrap();
    tokio::spawn(conn);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let n = reader.query_one("SELECT count(*) FROM hooks", &[]).await.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
        if n == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the trusted destination wrote {n} of 2 rows");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every connection to the server is encrypted, the destination's among them.
    let rows = reader.query("SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)", &[]).await.unwrap();
    assert!(rows.len() >= 2 && rows.iter().all(|r| r.get::<_, bool>(0)), "an unencrypted connection");

    let wrong_id = wrong["id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let attempts = loop {
        let res = t.req(Method::GET, &format!("/api/v1/app/{a}/attempt/endpoint/{wrong_id}")).send().await.unwrap();
        let page: serde_json::Value = res.json().await.unwrap();
        let data = page["data"].as_array().cloned().unwrap_or_default();
        if !data.is_empty() {
            break data;
        }
        assert!(std::time::Instant::now() < deadline, "no attempt was recorded for the untrusted destination");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(attempts.iter().all(|a| a["status"] != 0), "an attempt succeeded against the wrong CA: {attempts:?}");
    let said = attempts[0]["response"].as_str().unwrap_or_default().to_ascii_lowercase();
    assert!(said.contains("certificate") || said.contains("tls"), "the attempt says why: {said}");
    let exists = reader.query_one("SELECT to_regclass('wrong') IS NOT NULL", &[]).await.unwrap();
    assert!(!exists.get::<_, bool>(0), "nothing was written through the untrusted connection");
}

/// A destination on a private network (an allow-list opened loopback here)
/// answers as an endpoint does: its refusal is kept in the attempt log only if
/// the operator says so (`HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES`).
#[tokio::test]
async fn a_private_destinations_refusal_is_kept_only_where_the_operator_allows() {
    use reqwest::Method;
    use serde_json::json;

    // A server of its own: Hookgate's own Postgres is never a destination.
    let other = PgServer::start();
    for keep in [false, true] {
        let app = TestApp::spawn_with(|env| {
            env.insert("HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES".into(), keep.to_string());
        })
        .await;
        let t = app.tenant().await;
        let a = t.application().await;
        let url = hookgate_tests::db::with_database(&other.url(), "no_such_database");
        let dest = t
            .post(
                &format!("/api/v1/app/{a}/destination"),
                json!({"type": "postgres", "config": {"url": url, "tableName": "hooks"}}),
                201,
            )
            .await;
        t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "a.b", "payload": {}}), 202).await;
        let id = dest["id"].as_str().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let said = loop {
            let res = t.req(Method::GET, &format!("/api/v1/app/{a}/attempt/endpoint/{id}")).send().await.unwrap();
            let page: serde_json::Value = res.json().await.unwrap();
            if let Some(first) = page["data"].as_array().and_then(|d| d.first()) {
                break first["response"].as_str().unwrap_or_default().to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "no attempt was recorded");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        match keep {
            true => assert!(said.contains("no_such_database"), "the refusal is kept: {said}"),
            false => assert_eq!(said, hookgate_egress::deliver::send::PRIVATE_NOT_KEPT, "nothing of it is kept"),
        }
    }
}
