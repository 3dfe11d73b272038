//! Alerts for people, through a chat webhook (a real HTTP receiver on loopback):
//! an endpoint disabled, failing for a while, or exhausting messages is told
//! once per window to the tenant's and the operator's chat, and what the window
//! held back is counted in the next alert. (E-mail over SMTP, with STARTTLS and
//! AUTH, is tested against a real SMTP server in tests/python/test_alerts.py.)

use std::time::Duration;

use hookgate_tests::{
    sink::{Behaviour, Received, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

/// The text of each chat message the sink got.
fn texts(sink: &Sink) -> Vec<String> {
    sink.received()
        .iter()
        .map(|r: &Received| {
            let v: Value = serde_json::from_slice(&r.body).expect("a chat message is JSON");
            v["text"].as_str().expect("Slack's `text`").to_owned()
        })
        .collect()
}

/// Waits until `f` holds, for at most `secs` seconds.
async fn until(secs: u64, what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..secs * 10 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within {secs} s: {what}");
}

async fn patch_settings(app: &TestApp, key: Option<&str>, body: Value) -> (u16, Value) {
    let res = match key {
        Some(k) => app.api(k, Method::PATCH, "/api/v1/alert-settings"),
        None => app.admin(Method::PATCH, "/admin/v1/alert-settings"),
    }
    .json(&body)
    .send()
    .await
    .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_endpoint_disabled_after_failing_is_told_once_within_the_window_to_the_tenant_and_the_operator() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_DISABLE_AFTER_SECS".into(), "1".into());
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1,1".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await;
    let (failing, chat, operator_chat) = (Sink::start().await, Sink::start().await, Sink::start().await);
    failing.set(Behaviour { status: 500, ..Default::default() });
    let t = app.tenant().await;
    let (status, shown) =
        patch_settings(&app, Some(&t.key), json!({"chatUrl": chat.url, "events": ["endpoint.disabled"]})).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["chatUrl"], "http://127.0.0.1/…", "the URL is a secret: only its scheme and host are shown");
    assert_eq!(shown["events"], json!(["endpoint.disabled"]));
    assert_eq!((shown["windowMinutes"].as_i64(), shown["smtpConfigured"].as_bool()), (Some(60), Some(false)));
    let (status, _) = patch_settings(&app, None, json!({"chatUrl": operator_chat.url})).await;
    assert_eq!(status, 200);
    // The URL is stored sealed, never in clear.
    let db = app.db.client().await;
    let stored: Vec<u8> =
        db.query_one("SELECT chat_url_sealed FROM alert_settings WHERE tenant_id = $1", &[&t.id]).await.unwrap().get(0);
    assert!(!String::from_utf8_lossy(&stored).contains("127.0.0.1"), "sealed: {stored:?}");

    let a = t.application().await;
    let ep = t.endpoint(&a, &failing.url, json!({})).await;
    let ep_id = ep["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/app/{a}/endpoint/{ep_id}");
    t.message(&a, "order.paid", json!({"n": 1})).await;
    until(30, "the tenant's chat told of the disabled endpoint", async || !chat.received().is_empty()).await;
    assert!(t.get(&path).await["disabled"].as_bool().unwrap());
    let told = texts(&chat);
    assert!(told[0].starts_with("*[Hookgate] Endpoint disabled: http://127.0.0.1:"), "{}", told[0]);
    assert!(told[0].contains(&ep_id) && !told[0].contains(&t.id), "the tenant's own reader: {}", told[0]);
    // The operator's chat hears of the same, with the tenant named, and of the
    // exhausted message (the operator's settings tell every condition).
    until(30, "the operator told of both", async || {
        let o = texts(&operator_chat);
        o.iter().any(|x| x.contains("Endpoint disabled")) && o.iter().any(|x| x.contains("Message not delivered"))
    })
    .await;
    assert!(texts(&operator_chat).iter().all(|x| x.contains(&format!("Tenant: {}", t.id))));

    // Enabled again, it fails again and is disabled again: within the window,
    // the tenant is not told a second time; the mark counts it.
    let res = t.req(Method::PATCH, &path).json(&json!({"disabled": false})).send().await.unwrap();
    assert_eq!(res.status(), 200);
    t.message(&a, "order.paid", json!({"n": 2})).await;
    until(30, "disabled again", async || t.get(&path).await["disabled"].as_bool().unwrap()).await;
    until(10, "the second disabling counted as held", async || {
        let held: i32 = db
            .query_one(
                "SELECT held FROM alert_marks WHERE tenant_id = $1 AND condition = 'endpoint.disabled'",
                &[&t.id],
            )
            .await
            .unwrap()
            .get(0);
        held == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(texts(&chat).len(), 1, "one alert per condition per window: {:?}", texts(&chat));
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    let sent = r#"hookgate_alerts_total{channel="chat",condition="endpoint.disabled",outcome="sent"} "#;
    let n: u64 = metrics.lines().find_map(|l| l.strip_prefix(sent)).expect("the alert counted").parse().unwrap();
    assert_eq!(n, 2, "the tenant's and the operator's");
}

#[tokio::test]
async fn an_endpoint_failing_longer_than_the_tenants_setting_is_told_once_per_spell() {
    let app = TestApp::spawn_with(|env| {
        // One attempt, then a retry far away: the endpoint stays failing, not exhausted.
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "600".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await;
    let (failing, chat) = (Sink::start().await, Sink::start().await);
    failing.set(Behaviour { status: 503, ..Default::default() });
    let t = app.tenant().await;
    let (status, _) = patch_settings(&app, Some(&t.key), json!({"chatUrl": chat.url, "failingMinutes": 1})).await;
    assert_eq!(status, 200);
    // A minute is the API's least; the test waits one second.
    let db = app.db.client().await;
    db.execute("UPDATE alert_settings SET failing_secs = 1 WHERE tenant_id = $1", &[&t.id]).await.unwrap();
    // A tenant no one hears of fails too: the scan passes it by, so it never
    // stands in the way of those who are told.
    let silent = app.tenant().await;
    let sa = silent.application().await;
    let quiet = silent.endpoint(&sa, &failing.url, json!({})).await;
    silent.message(&sa, "order.paid", json!({"n": 0})).await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &failing.url, json!({})).await;
    t.message(&a, "order.paid", json!({"n": 1})).await;
    until(30, "told the endpoint is failing", async || !chat.received().is_empty()).await;
    let told = texts(&chat);
    assert!(told[0].contains("Endpoint failing") && told[0].contains(ep["id"].as_str().unwrap()), "{}", told[0]);
    assert!(told[0].contains("Failing since"), "{}", told[0]);
    // The scan runs every second: the same spell is not told again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(texts(&chat).len(), 1, "{:?}", texts(&chat));
    db.execute("UPDATE endpoints SET failing_since = now() - interval '1 hour' WHERE tenant_id = $1", &[&silent.id])
        .await
        .unwrap();
    let found = hookgate_shared::store::alert_scans::failing(&db, 100).await.unwrap();
    assert!(found.iter().all(|(_, _, e)| e != quiet["id"].as_str().unwrap()), "no one is told of it: {found:?}");
    // A new spell past the window is told again.
    db.execute("UPDATE alert_marks SET sent_at = now() - interval '2 hours' WHERE tenant_id = $1", &[&t.id])
        .await
        .unwrap();
    db.execute("UPDATE endpoints SET failing_since = now() - interval '1 hour' WHERE tenant_id = $1", &[&t.id])
        .await
        .unwrap();
    until(30, "told of the new spell", async || chat.received().len() == 2).await;
}

/// How many conditions an alert stands for: itself and those it says were held.
fn stands_for(text: &str) -> u32 {
    let held = text.find(" more like this").map(|end| {
        let start = text[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
        text[start..end].parse::<u32>().expect("a count")
    });
    1 + held.unwrap_or(0)
}

#[tokio::test]
async fn messages_exhausted_within_the_window_are_counted_in_the_next_alert() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await;
    let (failing, chat) = (Sink::start().await, Sink::start().await);
    failing.set(Behaviour { status: 500, ..Default::default() });
    let t = app.tenant().await;
    let body = json!({"chatUrl": chat.url, "events": ["message.attempt.exhausted"]});
    assert_eq!(patch_settings(&app, Some(&t.key), body).await.0, 200);
    let a = t.application().await;
    t.endpoint(&a, &failing.url, json!({})).await;
    for n in 0..3 {
        t.message(&a, "order.paid", json!({"n": n})).await;
    }
    let db = app.db.client().await;
    let exhausted = async || -> i64 {
        db.query_one("SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND status = 2", &[&t.id])
            .await
            .map_or(0, |r| r.get(0))
    };
    until(30, "three messages exhausted", async || exhausted().await == 3).await;
    until(10, "one alert", async || !chat.received().is_empty()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(chat.received().len(), 1, "{:?}", texts(&chat));
    // Past the window, the next exhaustion is told with what was held.
    db.execute("UPDATE alert_marks SET sent_at = now() - interval '2 hours' WHERE tenant_id = $1", &[&t.id])
        .await
        .unwrap();
    t.message(&a, "order.paid", json!({"n": 3})).await;
    until(30, "a second alert", async || chat.received().len() == 2).await;
    let told = texts(&chat);
    assert!(told.iter().all(|x| x.contains("Message not delivered")), "{told:?}");
    assert_eq!(told.iter().map(|x| stands_for(x)).sum::<u32>(), 4, "every exhaustion told or counted: {told:?}");
}

#[tokio::test]
async fn alert_settings_are_checked_when_saved_and_each_tenant_sees_only_its_own() {
    let app = TestApp::spawn().await;
    let (t1, t2) = (app.tenant().await, app.tenant().await);
    let cases = [
        (json!({"email": "not an address"}), "`email`"),
        (json!({"events": ["endpoint.deleted"]}), "`events`"),
        (json!({"windowMinutes": 0}), "`windowMinutes`"),
        (json!({"failingMinutes": 20000}), "`failingMinutes`"),
        (json!({"chatUrl": "ftp://127.0.0.1/x"}), "`chatUrl`"),
        // Loopback outside the allowed 127.0.0.1/32: refused by the SSRF guard, never dialled.
        (json!({"chatUrl": "http://127.0.0.2:9/hook"}), "`chatUrl`"),
        (json!({"unknown": 1}), "unknown"),
    ];
    for (body, names) in cases {
        let (status, answer) = patch_settings(&app, Some(&t1.key), body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert!(answer.to_string().contains(names), "{body}: {answer}");
    }
    let (status, shown) = patch_settings(
        &app,
        Some(&t1.key),
        json!({"email": "oncall@agency.example, lead@agency.example", "windowMinutes": 30}),
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["email"], "oncall@agency.example, lead@agency.example");
    assert_eq!(shown["windowMinutes"], 30);
    // Absent fields stay; null sets back the default.
    let (_, shown) = patch_settings(&app, Some(&t1.key), json!({"windowMinutes": null})).await;
    assert_eq!(
        (shown["email"].as_str(), shown["windowMinutes"].as_i64()),
        (Some("oncall@agency.example, lead@agency.example"), Some(60))
    );
    let theirs = t2.get("/api/v1/alert-settings").await;
    assert_eq!(theirs["email"], Value::Null, "another tenant's settings are its own: {theirs}");
    let operator = app.admin(Method::GET, "/admin/v1/alert-settings").send().await.unwrap();
    assert_eq!(operator.status(), 200);
    assert_eq!(operator.json::<Value>().await.unwrap()["email"], Value::Null);
}
