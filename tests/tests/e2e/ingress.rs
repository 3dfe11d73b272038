//! Ingress: sources, verification, exactly-once admission, the bad-input table.

use std::time::Duration;

use hookgate_tests::{
    providers,
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_stripe_test_secret";

struct Setup<'a> {
    app: &'a TestApp,
    key: String,
    source: Value,
}

async fn stripe_source<'a>(app: &'a TestApp, sink: &Sink, extra: Value) -> Setup<'a> {
    let t = app.tenant().await;
    let app_id = t.application().await;
    t.endpoint(&app_id, &sink.url, json!({})).await;
    let mut body = json!({"name": "stripe", "provider": "stripe", "secret": SECRET, "appId": app_id});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let source = t.post("/api/v1/source", body, 201).await;
    Setup { app, key: t.key.clone(), source }
}

impl Setup<'_> {
    fn url(&self) -> String {
        format!("/in/{}", self.source["id"].as_str().unwrap())
    }

    async fn send(&self, body: &str, sig: Option<String>) -> reqwest::Response {
        let mut req = self
            .app
            .http
            .post(self.app.url(&self.url()))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(s) = sig {
            req = req.header("Stripe-Signature", s);
        }
        req.send().await.unwrap()
    }

    async fn stripe(&self, body: &str) -> reqwest::Response {
        self.send(body, Some(providers::stripe(SECRET, providers::now(), body.as_bytes()))).await
    }

    async fn events(&self) -> Value {
        let path = format!("/api/v1/source/{}/event", self.source["id"].as_str().unwrap());
        self.app.api(&self.key, Method::GET, &path).send().await.unwrap().json().await.unwrap()
    }

    async fn stored(&self) -> i64 {
        let db = self.app.db.client().await;
        db.query_one("SELECT count(*) FROM inbound_events", &[]).await.unwrap().get(0)
    }
}

fn event(id: &str) -> String {
    format!(r#"{{"id": "{id}", "type": "invoice.paid", "data": {{"amount": 100}}}}"#)
}

#[tokio::test]
async fn a_stripe_event_is_admitted_once_and_forwarded_byte_for_byte() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;
    assert!(s.source["url"].as_str().unwrap().ends_with(&s.url()));
    let body = event("evt_1");
    let first = s.stripe(&body).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["hookgate-duplicate"], "false");
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "accepted");
    for _ in 0..3 {
        let again = s.stripe(&body).await;
        assert_eq!(again.headers()["hookgate-duplicate"], "true");
        let again: Value = again.json().await.unwrap();
        assert_eq!(
            (again["status"].as_str(), &again["eventId"], &again["key"]),
            (Some("duplicate"), &first["eventId"], &first["key"])
        );
    }
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.received().len(), 1, "one event, one delivery");
    assert_eq!(got[0].body, body.as_bytes());
    assert_eq!(got[0].header("idempotency-key"), first["key"].as_str());
    assert_eq!(got[0].header("content-type"), Some("application/json"));
    let events = s.events().await;
    assert_eq!(events["data"].as_array().unwrap().len(), 1);
    assert_eq!(events["data"][0]["duplicates"], 3);
    assert_eq!(events["data"][0]["eventType"], "invoice.paid");
    let msg_id = events["data"][0]["msgId"].as_str().unwrap();
    assert_eq!(got[0].header("webhook-id"), Some(msg_id));
    // The body is stored once, in the message, and read back through the event.
    let one =
        format!("/api/v1/source/{}/event/{}", s.source["id"].as_str().unwrap(), first["eventId"].as_str().unwrap());
    let one: Value = app.api(&s.key, Method::GET, &one).send().await.unwrap().json().await.unwrap();
    assert_eq!(one["payload"], serde_json::from_str::<Value>(&body).unwrap(), "{one}");
    let db = app.db.client().await;
    let copies: (i64, i64) = {
        let r = db
            .query_one(
                "SELECT (SELECT count(*) FROM inbound_events WHERE payload IS NOT NULL),
                        (SELECT count(*) FROM messages WHERE payload = $1)",
                &[&body.as_bytes()],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(copies, (0, 1), "one copy of the body, in the message");

    let replay = format!(
        "/api/v1/source/{}/event/{}/replay",
        s.source["id"].as_str().unwrap(),
        first["eventId"].as_str().unwrap()
    );
    let res = app.api(&s.key, Method::POST, &replay).send().await.unwrap();
    assert_eq!(res.status(), 202);
    let again = sink.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(again[1].header("webhook-id"), Some(msg_id), "a replay keeps the webhook-id");
}

#[tokio::test]
async fn two_tenants_sending_the_same_provider_event_id_both_get_it_admitted() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let a = stripe_source(&app, &sink, json!({})).await;
    let b = stripe_source(&app, &sink, json!({})).await;
    let body = event("evt_shared");
    let ra: Value = a.stripe(&body).await.json().await.unwrap();
    let rb: Value = b.stripe(&body).await.json().await.unwrap();
    assert_eq!((ra["status"].as_str(), rb["status"].as_str()), (Some("accepted"), Some("accepted")));
    assert_ne!(ra["key"], rb["key"]);
    sink.wait_for(2, Duration::from_secs(20)).await;
}

#[tokio::test]
async fn every_row_of_the_bad_input_table_is_answered_and_stores_nothing() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_MAX_BODY".into(), "2048".into());
    })
    .await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;
    let body = event("evt_bad");

    let unknown = app.http.post(app.url("/in/src_01JAAAAAAAAAAAAAAAAAAAAAAA")).body("{}").send().await.unwrap();
    assert_eq!(unknown.status(), 404);

    let big = "x".repeat(4096);
    let res = s.send(&big, Some(providers::stripe(SECRET, providers::now(), big.as_bytes()))).await;
    assert_eq!(res.status(), 413);

    let res = s.send(&body, None).await;
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["code"], "invalid_signature");
    assert!(err["detail"].as_str().unwrap().contains("stripe-signature"), "{err}");

    let res = s.send(&body, Some(providers::stripe("whsec_wrong", providers::now(), body.as_bytes()))).await;
    assert_eq!(res.status(), 401);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "invalid_signature");

    let res = s.send(&body, Some(providers::stripe(SECRET, providers::now() - 301, body.as_bytes()))).await;
    assert_eq!(res.status(), 401);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "timestamp_out_of_tolerance");

    let no_id = r#"{"type": "invoice.paid"}"#;
    let res = s.stripe(no_id).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["code"], "idempotency_key_missing");
    assert!(err["detail"].as_str().unwrap().contains("/id"), "{err}");

    assert_eq!(s.stored().await, 0, "nothing stored for any bad input");

    let path = format!("/api/v1/source/{}", s.source["id"].as_str().unwrap());
    app.api(&s.key, Method::PATCH, &path).json(&json!({"disabled": true})).send().await.unwrap();
    assert_eq!(s.stripe(&body).await.status(), 404, "a disabled source answers 404");
    app.api(&s.key, Method::PATCH, &path).json(&json!({"disabled": false})).send().await.unwrap();
    assert_eq!(s.stripe(&body).await.status(), 200);
    app.api(&s.key, Method::DELETE, &path).send().await.unwrap();
    assert_eq!(s.stripe(&event("evt_after")).await.status(), 404, "a deleted source answers 404");

    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    for outcome in ["too_large", "invalid_signature", "bad_request", "accepted"] {
        assert!(metrics.contains(&format!("outcome=\"{outcome}\"")), "{outcome} counted: {metrics}");
    }
}

#[tokio::test]
async fn a_deleted_tenants_sources_answer_404() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;
    let tenants: Value = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap().json().await.unwrap();
    let id = tenants["data"][0]["id"].as_str().unwrap();
    app.admin(Method::DELETE, &format!("/admin/v1/tenant/{id}")).send().await.unwrap();
    assert_eq!(s.stripe(&event("evt_x")).await.status(), 404);
}

#[tokio::test]
async fn with_redis_the_second_copy_is_answered_by_redis_and_after_a_flush_by_postgres() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;
    let body = event("evt_layers");
    assert_eq!(s.stripe(&body).await.status(), 200);
    assert_eq!(s.stripe(&body).await.headers()["hookgate-duplicate"], "true");
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"hookgate_ingress_duplicates_total{layer="redis"} 1"#), "{metrics}");
    flush_keys(&app);
    assert_eq!(s.stripe(&body).await.headers()["hookgate-duplicate"], "true");
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"hookgate_ingress_duplicates_total{layer="postgres"} 1"#), "{metrics}");
}

#[tokio::test]
async fn idempotency_overrides_and_disabled_sources() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let by_fields = stripe_source(&app, &sink, json!({"idempotency": {"fields": ["/data/amount", "/type"]}})).await;
    let r1: Value = by_fields.stripe(&event("evt_a")).await.json().await.unwrap();
    let r2: Value = by_fields.stripe(&event("evt_b")).await.json().await.unwrap();
    assert_eq!(
        (r1["status"].as_str(), r2["status"].as_str()),
        (Some("accepted"), Some("duplicate")),
        "same fields, same key"
    );

    let disabled = stripe_source(&app, &sink, json!({"idempotency": {"disabled": true}})).await;
    for _ in 0..3 {
        let r: Value = disabled.stripe(&event("evt_same")).await.json().await.unwrap();
        assert_eq!(r["status"], "accepted", "a source without idempotency admits every request");
    }
    assert_eq!(disabled.events().await["data"].as_array().unwrap().len(), 3);

    let t = app.tenant().await;
    let a = t.application().await;
    for (body, field) in [
        (json!({"name": "x", "provider": "nope", "appId": a}), "provider"),
        (json!({"name": "x", "provider": "none", "appId": a}), "allowUnverified"),
        (json!({"name": "x", "provider": "stripe", "appId": "app_missing"}), "appId"),
        (json!({"name": "x", "provider": "stripe", "appId": a, "idempotency": {"jsonPointer": "id"}}), "jsonPointer"),
        (json!({"name": "x", "provider": "hmac", "appId": a}), "hmac"),
        (json!({"name": "x", "provider": "stripe", "appId": a, "retention": 91}), "retention"),
    ] {
        let err = t.post("/api/v1/source", body.clone(), 422).await;
        assert!(hookgate_tests::error_text(&err).contains(field), "{body}: {err}");
    }
}

#[tokio::test]
async fn github_shopify_and_hmac_sources_verify_their_schemes() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let gh = t
        .post("/api/v1/source", json!({"name": "gh", "provider": "github", "secret": "gh-secret", "appId": a}), 201)
        .await;
    let body = r#"{"action":"opened"}"#;
    let send = |url: String, headers: Vec<(&'static str, String)>| {
        let mut req = app.http.post(app.url(&url)).header("content-type", "application/json").body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        async move { req.send().await.unwrap() }
    };
    let gh_url = format!("/in/{}", gh["id"].as_str().unwrap());
    let gh_headers = |sig: String| {
        vec![
            ("X-Hub-Signature-256", sig),
            ("X-GitHub-Event", "issues".into()),
            ("X-GitHub-Hook-ID", "9".into()),
            ("X-GitHub-Delivery", "d-1".into()),
        ]
    };
    assert_eq!(send(gh_url.clone(), gh_headers(providers::github("gh-secret", body.as_bytes()))).await.status(), 200);
    assert_eq!(send(gh_url.clone(), gh_headers(providers::github("other", body.as_bytes()))).await.status(), 401);

    let shop =
        t.post("/api/v1/source", json!({"name": "s", "provider": "shopify", "secret": "shop", "appId": a}), 201).await;
    let shop_url = format!("/in/{}", shop["id"].as_str().unwrap());
    let res = send(
        shop_url,
        vec![
            ("X-Shopify-Hmac-Sha256", providers::shopify("shop", body.as_bytes())),
            ("X-Shopify-Topic", "orders/create".into()),
            ("X-Shopify-Webhook-Id", "w1".into()),
        ],
    )
    .await;
    assert_eq!(res.status(), 200);

    let hm = t
        .post("/api/v1/source", json!({"name": "h", "provider": "hmac", "secret": "k", "appId": a, "hmac": {"header": "X-Sig", "encoding": "hex", "prefix": "sha256="}}), 201)
        .await;
    let hm_url = format!("/in/{}", hm["id"].as_str().unwrap());
    assert_eq!(send(hm_url.clone(), vec![("X-Sig", providers::github("k", body.as_bytes()))]).await.status(), 200);
    assert_eq!(send(hm_url, vec![("X-Sig", "sha256=00".into())]).await.status(), 401);

    let got = sink.wait_for(3, Duration::from_secs(20)).await;
    let mut types: Vec<String> = Vec::new();
    let db = app.db.client().await;
    for r in db.query("SELECT event_type FROM messages ORDER BY id", &[]).await.unwrap() {
        types.push(r.get(0));
    }
    assert_eq!(types, vec!["issues", "orders.create", "hmac"], "no type in an hmac body: the provider name");
    assert_eq!(got.len(), 3);
}

#[tokio::test]
async fn a_rotated_source_secret_accepts_both_during_the_grace_period() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;
    let path = format!("/api/v1/source/{}/secret/rotate", s.source["id"].as_str().unwrap());
    let res: Value = app
        .api(&s.key, Method::POST, &path)
        .json(&json!({"key": "whsec_new_one"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(res["key"], "whsec_new_one");
    let b1 = event("evt_old_secret");
    assert_eq!(s.stripe(&b1).await.status(), 200, "the old secret still works");
    let b2 = event("evt_new_secret");
    let res = s.send(&b2, Some(providers::stripe("whsec_new_one", providers::now(), b2.as_bytes()))).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn sync_mode_a_failing_handler_makes_the_providers_retry_process_it_again() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { fail_first: 1, ..Default::default() });
    let s = stripe_source(&app, &sink, json!({"mode": "sync"})).await;
    let body = event("evt_sync");
    let first = s.stripe(&body).await;
    assert_eq!(first.status(), 502);
    assert_eq!(s.stored().await, 0, "released for the retry");
    let retry = s.stripe(&body).await;
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.json::<Value>().await.unwrap()["status"], "accepted");
    let dup = s.stripe(&body).await;
    assert_eq!(dup.json::<Value>().await.unwrap()["status"], "duplicate");
    let got = sink.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"), "stable across the provider's retries");
    assert_eq!(got[1].body, body.as_bytes());
}

#[tokio::test]
async fn sync_mode_a_duplicate_during_processing_answers_409() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { delay: Duration::from_millis(1500), ..Default::default() });
    let s = stripe_source(&app, &sink, json!({"mode": "sync"})).await;
    let body = event("evt_slow");
    let (a, b) = tokio::join!(s.stripe(&body), async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        s.stripe(&body).await
    });
    assert_eq!(a.status(), 200);
    assert_eq!(b.status(), 409);
    assert_eq!(b.json::<Value>().await.unwrap()["code"], "in_flight");
}

#[tokio::test]
async fn sync_mode_a_crashed_processing_row_is_taken_over_after_the_lease() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_SYNC_LEASE_SECS".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({"mode": "sync"})).await;
    let body = event("evt_crash");
    // A first copy got its row and then its process died: the row stays `processing`.
    let held = sink.clone();
    held.set(Behaviour { delay: Duration::from_secs(30), ..Default::default() });
    let crashed = tokio::spawn({
        let req = app
            .http
            .post(app.url(&s.url()))
            .header("content-type", "application/json")
            .header("Stripe-Signature", providers::stripe(SECRET, providers::now(), body.as_bytes()))
            .body(body.clone());
        async move { req.timeout(Duration::from_millis(300)).send().await }
    });
    let _ = crashed.await;
    sink.set(Behaviour::default());
    let busy = s.stripe(&body).await;
    assert_eq!(busy.status(), 409, "within the lease the row is still owned");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let taken = s.stripe(&body).await;
    assert_eq!(taken.status(), 200, "after the lease the next retry takes over");
    assert_eq!(taken.json::<Value>().await.unwrap()["status"], "accepted");
}

#[tokio::test]
async fn inbound_events_past_retention_are_pruned_in_batches() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({"retention": 1})).await;
    for i in 0..3 {
        s.stripe(&event(&format!("evt_old_{i}"))).await;
    }
    s.stripe(&event("evt_new")).await;
    let mut db = app.db.client().await;
    // `evt_new` came last: the highest id.
    hookgate_tests::db::age_inbound_events(&db, "id <> (SELECT max(id) FROM inbound_events)", 2).await;
    use hookgate_shared::store::retention;
    // A source's one day is shorter than the longest window (30): its events go row by row.
    let first = retention::prune_inbound_events(&mut db, 30, 30, 2).await.unwrap();
    let second = retention::prune_inbound_events(&mut db, 30, 30, 2).await.unwrap();
    assert_eq!((first, second), (2, 1), "bounded batches");
    assert_eq!(s.stored().await, 1);
    let keys = (
        retention::prune_inbound_keys(&db, 30, 2).await.unwrap(),
        retention::prune_inbound_keys(&db, 30, 2).await.unwrap(),
    );
    assert_eq!(keys, (2, 1), "their keys too: the dedupe window ended");
    let left: i64 = db.query_one("SELECT count(*) FROM inbound_keys", &[]).await.unwrap().get(0);
    assert_eq!(left, 1);
}

#[tokio::test]
async fn with_postgres_down_ingress_answers_503_and_admits_the_retries_once_when_it_returns() {
    let pg = hookgate_tests::servers::PgServer::start();
    let app = TestApp::spawn_on_server(&pg, "own", |env| {
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "500".into());
    })
    .await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({})).await;

    pg.stop();
    let bodies: Vec<String> = (0..5).map(|i| event(&format!("evt_down_{i}"))).collect();
    for b in &bodies {
        let res = s.stripe(b).await;
        assert_eq!(res.status(), 503);
        assert_eq!(res.json::<Value>().await.unwrap()["code"], "unavailable");
    }
    pg.start_again();
    let mut statuses = Vec::new();
    for b in &bodies {
        let mut got = 0;
        for _ in 0..50 {
            let res = s.stripe(b).await;
            if res.status() == 200 {
                got = 200;
                statuses.push(res.json::<Value>().await.unwrap()["status"].as_str().unwrap().to_owned());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(got, 200, "admitted once Postgres is back");
        let again: Value = s.stripe(b).await.json().await.unwrap();
        assert_eq!(again["status"], "duplicate");
    }
    assert_eq!(statuses, vec!["accepted"; 5], "nothing had been admitted while it was down");
    assert_eq!(s.stored().await, 5);
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"hookgate_ingress_requests_total{outcome="unavailable",tenant=""} 5"#), "{metrics}");
}

/// The largest TTL among this test's inbound dedupe keys in Redis (they carry its
/// prefix and `:in:`), -2 when there is none.
fn largest_ttl(app: &TestApp) -> i64 {
    use std::io::{Read, Write};
    let url = app.env["REDIS_URL"].clone();
    let prefix = app.env["HOOKGATE_REDIS_PREFIX"].clone();
    let port: u16 = url.trim_end_matches('/').rsplit(':').next().unwrap().parse().unwrap();
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let script = "local m = -2 for _,k in ipairs(redis.call('KEYS', ARGV[1])) do local t = redis.call('TTL', k) if t > m then m = t end end return m";
    conn.write_all(format!("EVAL \"{script}\" 0 {prefix}*:in:*\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).unwrap();
    let answer = std::str::from_utf8(&buf[..n]).unwrap();
    answer.trim().trim_start_matches(':').parse().unwrap_or_else(|_| panic!("redis answered {answer}"))
}

/// Deletes this test's Redis keys (they carry its prefix), as a flush would.
fn flush_keys(app: &TestApp) {
    use std::io::{Read, Write};
    let url = app.env["REDIS_URL"].clone();
    let prefix = app.env["HOOKGATE_REDIS_PREFIX"].clone();
    let port: u16 = url.trim_end_matches('/').rsplit(':').next().unwrap().parse().unwrap();
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(format!("EVAL \"for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0\" 0 {prefix}*\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let _ = conn.read(&mut buf).unwrap();
}

#[tokio::test]
async fn a_duplicate_postgres_answers_rearms_redis_only_for_what_is_left_of_the_window() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let s = stripe_source(&app, &sink, json!({"mode": "sync", "retention": 1})).await;
    let body = event("evt_window_left");
    assert_eq!(s.stripe(&body).await.status(), 200);
    let whole = largest_ttl(&app);
    assert!(whole > 86_000, "a new key is remembered for the whole day: {whole}");
    // Redis lost the key; the event was first received 23 hours ago.
    flush_keys(&app);
    let db = app.db.client().await;
    db.execute("UPDATE inbound_keys SET received_at = now() - interval '23 hours'", &[]).await.unwrap();
    assert_eq!(s.stripe(&body).await.headers()["hookgate-duplicate"], "true");
    let left = largest_ttl(&app);
    assert!((3_000..=3_600).contains(&left), "re-armed for the hour left, not a new day: {left}");
    // Past the window (the row not pruned yet): Postgres answers, Redis is not re-armed.
    flush_keys(&app);
    db.execute("UPDATE inbound_keys SET received_at = now() - interval '25 hours'", &[]).await.unwrap();
    assert_eq!(s.stripe(&body).await.headers()["hookgate-duplicate"], "true");
    assert_eq!(largest_ttl(&app), -2, "nothing re-armed past the window");
}
