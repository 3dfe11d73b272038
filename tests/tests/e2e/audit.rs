//! The console's operator routes: the audit log, reading a tenant as its
//! operator (`Hookgate-Tenant`), key labels and the fleet's health.

use std::time::Duration;

use hookgate_tests::{error_text, sink::Behaviour, Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

async fn audit(app: &TestApp, key: &str) -> Vec<Value> {
    let res = app.api(key, Method::GET, "/api/v1/audit?limit=100").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let page: Value = res.json().await.unwrap();
    page["data"].as_array().unwrap().clone()
}

fn lines(entries: &[Value]) -> Vec<String> {
    entries.iter().map(|e| format!("{} {} {} {}", e["actor"], e["method"], e["path"], e["statusCode"])).collect()
}

#[tokio::test]
async fn every_change_is_recorded_with_who_made_it_and_reads_refusals_and_publishing_are_not() {
    let app = TestApp::spawn().await;
    let created = app.create_tenant("Audited").await;
    let tenant = created["id"].as_str().unwrap();
    let first = created["apiKey"].as_str().unwrap();
    let res = app
        .admin(Method::POST, &format!("/admin/v1/tenant/{tenant}/api-key"))
        .json(&json!({"label": "billing service"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let labelled: Value = res.json().await.unwrap();
    assert_eq!(labelled["label"], "billing service");
    let key = labelled["apiKey"].as_str().unwrap();
    let key_id = labelled["id"].as_str().unwrap();

    let made = app.api(key, Method::POST, "/api/v1/app").json(&json!({"name": "shop"})).send().await.unwrap();
    assert_eq!(made.status(), 201);
    let app_id = made.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    // Publishing is the data path; a read is no change; a refused change changed nothing.
    let msg = app
        .api(key, Method::POST, &format!("/api/v1/app/{app_id}/msg"))
        .json(&json!({"eventType": "a.b", "payload": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(msg.status(), 202);
    assert_eq!(app.api(key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);
    let bad = app.api(key, Method::POST, "/api/v1/app").json(&json!({"name": ""})).send().await.unwrap();
    assert_eq!(bad.status(), 422);

    let entries = audit(&app, first).await;
    let seen = lines(&entries);
    assert_eq!(
        seen,
        vec![
            format!("\"key:{key_id}\" \"POST\" \"/api/v1/app\" 201"),
            format!("\"operator\" \"POST\" \"/admin/v1/tenant/{tenant}/api-key\" 201"),
            "\"operator\" \"POST\" \"/admin/v1/tenant\" 201".to_owned(),
        ],
        "newest first, only the changes"
    );
    assert_eq!(entries[0]["actorLabel"], "billing service", "the key is named by its label");
    assert!(entries[0]["requestId"].as_str().unwrap().starts_with("req_"), "{}", entries[0]);

    // The operator reads the same log by the tenant's id; another tenant sees none of it.
    let res = app.admin(Method::GET, &format!("/admin/v1/tenant/{tenant}/audit")).send().await.unwrap();
    let page: Value = res.json().await.unwrap();
    assert_eq!(lines(page["data"].as_array().unwrap()), seen);
    let other = app.create_tenant("Other").await;
    let theirs = audit(&app, other["apiKey"].as_str().unwrap()).await;
    assert_eq!(lines(&theirs), vec!["\"operator\" \"POST\" \"/admin/v1/tenant\" 201".to_owned()]);

    // Relabelled later: entries name the key by its label now.
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{tenant}/api-key/{key_id}"))
        .json(&json!({"label": "billing v2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let keys: Value = app
        .admin(Method::GET, &format!("/admin/v1/tenant/{tenant}/api-key"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = keys["data"].as_array().unwrap().iter().find(|k| k["id"] == key_id).unwrap().clone();
    assert_eq!(listed["label"], "billing v2");
    let entries = audit(&app, first).await;
    let by_key = entries.iter().find(|e| e["actor"] == format!("key:{key_id}")).unwrap();
    assert_eq!(by_key["actorLabel"], "billing v2");
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{tenant}/api-key/{key_id}"))
        .json(&json!({"label": "x".repeat(101)}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert!(error_text(&res.json().await.unwrap()).contains("label"));
}

#[tokio::test]
async fn the_operator_reads_a_tenant_only_with_get_never_a_secret_and_each_read_is_recorded() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({"headers": {"Authorization": "Bearer customer-secret"}})).await;
    let ep = ep["id"].as_str().unwrap().to_owned();
    let inspect =
        |method: Method, path: &str, tenant: &str| app.admin(method, path).header("Hookgate-Tenant", tenant.to_owned());

    let res = inspect(Method::GET, "/api/v1/app", &t.id).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let apps: Value = res.json().await.unwrap();
    assert_eq!(apps["data"][0]["id"], a.as_str(), "the tenant's own applications");
    let who: Value = inspect(Method::GET, "/api/v1/auth/whoami", &t.id).send().await.unwrap().json().await.unwrap();
    assert_eq!(who["readOnly"], true, "{who}");

    for (method, path, status) in [
        (Method::POST, "/api/v1/app".to_owned(), 403),
        (Method::DELETE, format!("/api/v1/app/{a}"), 403),
        (Method::GET, format!("/api/v1/app/{a}/endpoint/{ep}/secret"), 403),
        (Method::GET, format!("/api/v1/app/{a}/endpoint/{ep}/secret/"), 403),
        (Method::GET, format!("/api/v1/app/{a}/endpoint/{ep}/transformation"), 403),
        (Method::GET, format!("/api/v1/app/{a}/integration"), 403),
        (Method::GET, format!("/api/v1/app/{a}/poller/{ep}/consumer/theirs"), 403),
        (Method::GET, "/api/v1/source".to_owned(), 403),
        (Method::GET, "/api/v1/environment/export".to_owned(), 403),
        (Method::GET, "/ingest/api/v1/source".to_owned(), 403),
    ] {
        let res = inspect(method.clone(), &path, &t.id).json(&json!({"name": "x"})).send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "{method} {path}");
    }
    // Header names, never their values.
    let res = inspect(Method::GET, &format!("/api/v1/app/{a}/endpoint/{ep}/headers"), &t.id).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let headers = res.text().await.unwrap();
    assert!(headers.contains("Authorization") && !headers.contains("customer-secret"), "{headers}");
    let bad = inspect(Method::GET, "/api/v1/app", "acme").send().await.unwrap();
    assert_eq!(bad.status(), 422);
    let unknown = inspect(Method::GET, "/api/v1/app", "tnt_01HZZZZZZZZZZZZZZZZZZZZZZZ").send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    // The header is the admin token's only: a tenant's key with it is refused.
    let with_key = app.api(&t.key, Method::GET, "/api/v1/app").header("Hookgate-Tenant", t.id.clone()).send().await;
    assert_eq!(with_key.unwrap().status(), 401);
    let wrong =
        app.api("not-the-admin-token", Method::GET, "/api/v1/app").header("Hookgate-Tenant", t.id.clone()).send().await;
    assert_eq!(wrong.unwrap().status(), 401);

    // The tenant sees what the operator looked at; the refused tries changed nothing and are not listed.
    let entries = audit(&app, &t.key).await;
    let reads: Vec<String> = entries
        .iter()
        .filter(|e| e["actor"] == "operator" && e["method"] == "GET")
        .map(|e| e["path"].to_string())
        .collect();
    let headers_read = format!("\"/api/v1/app/{a}/endpoint/{ep}/headers\"");
    assert_eq!(reads, vec![headers_read.as_str(), "\"/api/v1/auth/whoami\"", "\"/api/v1/app\""], "{entries:?}");
    assert!(!entries.iter().any(|e| e["method"] == "DELETE"));

    // A deleted tenant is not read.
    assert_eq!(app.admin(Method::DELETE, &format!("/admin/v1/tenant/{}", t.id)).send().await.unwrap().status(), 204);
    assert_eq!(inspect(Method::GET, "/api/v1/app", &t.id).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn audit_entries_past_the_tenants_message_retention_are_pruned_and_newer_ones_kept() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let t = app.tenant().await;
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
        .json(&json!({"retention": {"messageDays": 2}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let db = app.db.client().await;
    for days in [3, 1] {
        db.execute(
            "INSERT INTO audit_log (tenant_id, id, actor, method, path, status_code)
             VALUES ($1, hookgate_id_floor('aud', now() - make_interval(days => $2)), 'operator', 'POST', $3, 200)",
            &[&t.id, &days, &format!("/aged/{days}")],
        )
        .await
        .unwrap();
    }
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let paths: Vec<String> = db
            .query("SELECT path FROM audit_log WHERE tenant_id = $1 AND path LIKE '/aged/%' ORDER BY id", &[&t.id])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if paths == vec!["/aged/1".to_owned()] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left: {paths:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let entries = audit(&app, &t.key).await;
    assert!(entries.iter().any(|e| e["path"] == format!("/admin/v1/tenant/{}", t.id)), "the PATCH stays");
}

#[tokio::test]
async fn the_fleet_health_counts_the_backlog_and_names_the_workers_that_report() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 500, ..Behaviour::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    for n in 0..3 {
        t.message(&a, "a.b", json!({ "n": n })).await;
    }
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let res = app.admin(Method::GET, "/admin/v1/health").send().await.unwrap();
        assert_eq!(res.status(), 200);
        let f: Value = res.json().await.unwrap();
        assert_eq!(f["postgres"]["up"], true, "{f}");
        assert!(f["postgres"]["pools"].as_array().is_some_and(|p| !p.is_empty()), "{f}");
        let waiting = f["backlog"]["waiting"].as_i64().unwrap();
        if waiting >= 3 && !f["workers"].as_array().unwrap().is_empty() && sink.received().len() >= 3 {
            assert!(f["backlog"]["due"].as_i64().unwrap() <= waiting, "{f}");
            assert!(f["workers"][0]["name"].is_string() && f["workers"][0]["pressureMs"].is_i64(), "{f}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{f}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A tenant's key is not the operator's.
    assert_eq!(app.api(&t.key, Method::GET, "/admin/v1/health").send().await.unwrap().status(), 401);
}
