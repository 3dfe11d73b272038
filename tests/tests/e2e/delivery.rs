//! Delivery end to end: signed, stable ids, retries, resend, filters, SSRF, 410.

use std::time::Duration;

use hookgate_tests::{
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

async fn fast_retries() -> TestApp {
    TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1,1,1".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await
}

#[tokio::test]
async fn a_message_reaches_its_endpoint_signed_with_its_stable_id_and_exact_body() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let raw = r#"{"b": 1,   "a": [1, 2, 3], "unicode": "é"}"#;
    let res = t
        .req(Method::POST, &format!("/api/v1/app/{a}/msg"))
        .header("content-type", "application/json")
        .body(format!(r#"{{"eventType": "invoice.paid", "payload": {raw}}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let msg: Value = res.json().await.unwrap();
    let got = sink.wait_for(1, WAIT).await;
    let r = &got[0];
    assert_eq!(r.body, raw.as_bytes(), "the payload byte for byte");
    assert_eq!(r.header("webhook-id"), msg["id"].as_str());
    assert_eq!(r.header("svix-id"), msg["id"].as_str());
    assert_eq!(r.header("idempotency-key"), msg["id"].as_str());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let ts: i64 = r.header("webhook-timestamp").unwrap().parse().unwrap();
    assert!((chrono::Utc::now().timestamp() - ts).abs() < 30);
    assert!(r.header("webhook-signature").unwrap().starts_with("v1,"));
}

#[tokio::test]
async fn a_failing_endpoint_is_retried_with_the_same_id_and_every_attempt_is_listed() {
    let app = fast_retries().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { fail_first: 3, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(t.message(&a, "order.created", json!({"n": i})).await["id"].as_str().unwrap().to_owned());
    }
    let got = sink.wait_for(12, Duration::from_secs(30)).await;
    for id in &ids {
        let tries: Vec<_> = got.iter().filter(|r| r.header("webhook-id") == Some(id)).collect();
        assert_eq!(tries.len(), 4, "three failures, then the success, all with webhook-id {id}");
        let stamps: std::collections::HashSet<_> = tries.iter().map(|r| r.header("webhook-timestamp")).collect();
        assert!(!stamps.is_empty());
    }
    // The last result is written just after the sink answered; give it a moment.
    let ep_id = ep["id"].as_str().unwrap();
    let mut attempts = Value::Null;
    for _ in 0..50 {
        attempts = t.get(&format!("/api/v1/app/{a}/attempt/msg/{}", ids[0])).await;
        if attempts["data"].as_array().unwrap().len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let data = attempts["data"].as_array().unwrap();
    assert_eq!(data.len(), 4, "{attempts}");
    assert_eq!(data[0]["status"], 0, "newest first: the success");
    assert_eq!(data[0]["responseStatusCode"], 200);
    assert!(data[1..].iter().all(|a| a["status"] == 2 && a["responseStatusCode"] == 500));
    assert!(data.iter().all(|a| a["endpointId"] == ep_id && a["msgId"] == ids[0].as_str()));
    let by_ep = t.get(&format!("/api/v1/app/{a}/attempt/endpoint/{ep_id}")).await;
    assert_eq!(by_ep["data"].as_array().unwrap().len(), 12);
    let dest = t.get(&format!("/api/v1/app/{a}/msg/{}/endpoint", ids[0])).await;
    assert_eq!(dest["data"][0]["id"], ep_id);
    assert_eq!(dest["data"][0]["status"], 0);
    let msgs = t.get(&format!("/api/v1/app/{a}/endpoint/{ep_id}/msg")).await;
    assert_eq!(msgs["data"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn an_exhausted_delivery_ends_failed_and_a_manual_resend_keeps_its_id() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 503, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let ep_id = ep["id"].as_str().unwrap();
    let msg = t.message(&a, "x", json!({})).await;
    let id = msg["id"].as_str().unwrap();
    sink.wait_for(2, WAIT).await;
    let mut status = Value::Null;
    for _ in 0..50 {
        status = t.get(&format!("/api/v1/app/{a}/msg/{id}/endpoint")).await["data"][0]["status"].clone();
        if status == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 2, "failed after the schedule");
    let stats = t.get(&format!("/api/v1/app/{a}/endpoint/{ep_id}/stats")).await;
    assert_eq!(stats["fail"], 1);

    sink.set(Behaviour::default());
    let res = t.req(Method::POST, &format!("/api/v1/app/{a}/msg/{id}/endpoint/{ep_id}/resend")).send().await.unwrap();
    assert_eq!(res.status(), 202);
    let got = sink.wait_for(3, WAIT).await;
    assert!(got.iter().all(|r| r.header("webhook-id") == Some(id)), "the same webhook-id on a manual resend");
    assert_eq!(got[2].body, b"{}");
    let mut triggers = Vec::new();
    for _ in 0..50 {
        let attempts = t.get(&format!("/api/v1/app/{a}/attempt/msg/{id}")).await;
        triggers = attempts["data"].as_array().unwrap().iter().map(|x| x["triggerType"].as_i64().unwrap()).collect();
        if triggers.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(triggers, vec![1, 0, 0], "the manual attempt is marked as such");
}

#[tokio::test]
async fn recover_resends_the_failed_deliveries_of_an_endpoint() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 500, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let since = chrono::Utc::now() - chrono::Duration::minutes(1);
    for i in 0..3 {
        t.message(&a, "x", json!({"i": i})).await;
    }
    sink.wait_for(3, WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sink.set(Behaviour::default());
    let path = format!("/api/v1/app/{a}/endpoint/{}/recover", ep["id"].as_str().unwrap());
    let res = t.post(&path, json!({ "since": since }), 202).await;
    assert_eq!(res["task"], "endpoint.recover");
    sink.wait_for(6, WAIT).await;
}

#[tokio::test]
async fn an_event_id_repeat_answers_409_and_creates_nothing() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let body = json!({"eventType": "x", "payload": {}, "eventId": "evt-1"});
    t.post(&format!("/api/v1/app/{a}/msg"), body.clone(), 202).await;
    let err = t.post(&format!("/api/v1/app/{a}/msg"), body, 409).await;
    assert_eq!(err["code"], "conflict");
    let list = t.get(&format!("/api/v1/app/{a}/msg")).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let by_event_id = t.get(&format!("/api/v1/app/{a}/msg/evt-1")).await;
    assert_eq!(by_event_id["eventId"], "evt-1");
}

#[tokio::test]
async fn endpoints_receive_only_the_event_types_and_channels_they_subscribed() {
    let app = TestApp::spawn().await;
    let (all, paid, chan) = (Sink::start().await, Sink::start().await, Sink::start().await);
    let t = app.tenant().await;
    let a = t.application().await;
    t.post("/api/v1/event-type", json!({"name": "invoice.paid", "description": "paid"}), 201).await;
    t.endpoint(&a, &all.url, json!({})).await;
    t.endpoint(&a, &paid.url, json!({"eventTypes": ["invoice.paid"]})).await;
    t.endpoint(&a, &chan.url, json!({"channels": ["eu"]})).await;
    t.message(&a, "invoice.created", json!({})).await;
    t.message(&a, "invoice.paid", json!({})).await;
    t.post(
        &format!("/api/v1/app/{a}/msg"),
        json!({"eventType": "invoice.paid", "payload": {}, "channels": ["eu"]}),
        202,
    )
    .await;
    all.wait_for(3, WAIT).await;
    paid.wait_for(2, WAIT).await;
    chan.wait_for(1, WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!((all.received().len(), paid.received().len(), chan.received().len()), (3, 2, 1));
}

#[tokio::test]
async fn endpoint_urls_on_loopback_outside_the_allow_list_are_refused_clearly() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    for url in ["http://127.0.0.2:9/hook", "http://[::1]:9/hook", "ftp://127.0.0.1/x", "not a url"] {
        let err = t.post(&format!("/api/v1/app/{a}/endpoint"), json!({"url": url}), 422).await;
        let text = hookgate_tests::error_text(&err);
        assert!(text.contains("url"), "{url}: {text}");
    }
    let err = t.post(&format!("/api/v1/app/{a}/endpoint"), json!({"url": "http://127.0.0.2:9/"}), 422).await;
    assert!(hookgate_tests::error_text(&err).contains("loopback"), "{err}");
}

#[tokio::test]
async fn a_410_disables_the_endpoint_and_later_messages_do_not_go_there() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 410, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    t.message(&a, "x", json!({})).await;
    sink.wait_for(1, WAIT).await;
    let path = format!("/api/v1/app/{a}/endpoint/{}", ep["id"].as_str().unwrap());
    let mut disabled = false;
    for _ in 0..50 {
        disabled = t.get(&path).await["disabled"].as_bool().unwrap();
        if disabled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(disabled);
    t.message(&a, "x", json!({})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.received().len(), 1);
    let metrics = app.http.get(app.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hookgate_endpoints_disabled_total 1"), "{metrics}");
}

#[tokio::test]
async fn custom_headers_are_sent_and_a_rotated_secret_signs_with_both_keys() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    let base = format!("/api/v1/app/{a}/endpoint/{}", ep["id"].as_str().unwrap());
    let res = t
        .req(Method::PUT, &format!("{base}/headers"))
        .json(&json!({"headers": {"X-Custom": "yes", "Authorization": "Bearer s3cret"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let headers = t.get(&format!("{base}/headers")).await;
    assert_eq!(headers["headers"]["X-Custom"], "yes");
    assert_eq!(headers["sensitive"], json!(["Authorization"]));
    let old = t.get(&format!("{base}/secret")).await["key"].as_str().unwrap().to_owned();
    let rotated = t.post(&format!("{base}/secret/rotate"), json!({}), 200).await;
    let new = t.get(&format!("{base}/secret")).await["key"].as_str().unwrap().to_owned();
    assert_eq!(rotated["key"], new.as_str());
    assert_ne!(old, new);

    let msg = t.message(&a, "x", json!({"k": "v"})).await;
    let r = &sink.wait_for(1, WAIT).await[0];
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
    let sigs: Vec<&str> = r.header("webhook-signature").unwrap().split(' ').collect();
    assert_eq!(sigs.len(), 2, "one signature per valid secret during the grace period");
    let ts: i64 = r.header("webhook-timestamp").unwrap().parse().unwrap();
    let id = msg["id"].as_str().unwrap();
    for secret in [&new, &old] {
        let key = hookgate_egress::signing::EndpointSecret::parse(secret).unwrap();
        let expected = hookgate_egress::signing::sign(&key, id, ts, &r.body);
        assert!(sigs.contains(&expected.as_str()), "{secret} signs too");
    }
}

#[tokio::test]
async fn an_endpoint_failing_longer_than_disable_after_is_disabled() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1,1,1,1".into());
        env.insert("HOOKGATE_DISABLE_AFTER_SECS".into(), "1".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { status: 500, ..Default::default() });
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await;
    t.message(&a, "x", json!({})).await;
    let path = format!("/api/v1/app/{a}/endpoint/{}", ep["id"].as_str().unwrap());
    let mut disabled = false;
    for _ in 0..100 {
        disabled = t.get(&path).await["disabled"].as_bool().unwrap();
        if disabled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(disabled, "disabled after failing for over a second");
    let n = sink.received().len();
    assert!((2..=4).contains(&n), "{n} attempts: the streak began at the first, disabled at a later one");
}

#[tokio::test]
async fn an_applications_throttle_rate_is_shared_by_its_endpoints() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "50".into());
    })
    .await;
    let (s1, s2) = (Sink::start().await, Sink::start().await);
    let t = app.tenant().await;
    let a = t.post("/api/v1/app", json!({"name": "slow", "throttleRate": 4}), 201).await;
    let a = a["id"].as_str().unwrap();
    t.endpoint(a, &s1.url, json!({})).await;
    t.endpoint(a, &s2.url, json!({})).await;
    for i in 0..6 {
        t.message(a, "x", json!({"i": i})).await;
    }
    let started = std::time::Instant::now();
    s1.wait_for(6, WAIT).await;
    s2.wait_for(6, WAIT).await;
    let mut times: Vec<_> = s1.received().iter().chain(s2.received().iter()).map(|r| r.at).collect();
    times.sort();
    for (i, start) in times.iter().enumerate() {
        let n = times[i..].iter().filter(|t| t.duration_since(*start) < Duration::from_secs(1)).count();
        assert!(n <= 4, "{n} deliveries of the application within one second");
    }
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[tokio::test]
async fn a_tenant_can_turn_the_svix_header_aliases_off() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
        .json(&json!({"svixHeaders": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<Value>().await.unwrap()["svixHeaders"], false);
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let msg = t.message(&a, "x", json!({})).await;
    let r = &sink.wait_for(1, WAIT).await[0];
    assert_eq!(r.header("webhook-id"), msg["id"].as_str());
    assert!(r.header("webhook-signature").is_some());
    assert_eq!((r.header("svix-id"), r.header("svix-signature")), (None, None));
}

#[tokio::test]
async fn a_message_with_an_inline_application_creates_it_under_the_path_uid() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let body =
        json!({"eventType": "x", "payload": {"a": 1}, "application": {"name": "Made inline", "uid": "inline-uid"}});
    let msg = t.post("/api/v1/app/inline-uid/msg", body.clone(), 202).await;
    assert!(msg["id"].as_str().unwrap().starts_with("msg_"));
    let created = t.get("/api/v1/app/inline-uid").await;
    assert_eq!((created["name"].as_str(), created["uid"].as_str()), (Some("Made inline"), Some("inline-uid")));
    let listed = t.get("/api/v1/app/inline-uid/msg").await;
    assert_eq!(listed["data"][0]["id"], msg["id"]);
    let missing = t.post("/api/v1/app/no-such-app/msg", json!({"eventType": "x", "payload": {}}), 404).await;
    assert_eq!(missing["code"], "not_found");
}

#[tokio::test]
async fn a_patch_keeps_what_changed_meanwhile_in_the_fields_it_does_not_name() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let sink = Sink::start().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    // The recorder disables the endpoint while a PATCH of its description runs:
    // here, a transaction holding the row, then disabling it once the PATCH waits.
    let mut holder = app.db.client().await;
    let tx = holder.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM endpoints WHERE id = $1 FOR NO KEY UPDATE", &[&ep]).await.unwrap();
    let patch =
        t.req(Method::PATCH, &format!("/api/v1/app/{a}/endpoint/{ep}")).json(&json!({"description": "renamed"})).send();
    let patch = tokio::spawn(patch);
    let watcher = app.db.client().await;
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%endpoints%'";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while watcher.query_one(waiting, &[]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "the PATCH reaches the endpoint's row");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.execute("UPDATE endpoints SET disabled = true, failing_since = now() WHERE id = $1", &[&ep]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(patch.await.unwrap().unwrap().status(), 200);
    let got = t.get(&format!("/api/v1/app/{a}/endpoint/{ep}")).await;
    assert_eq!((got["description"].as_str(), got["disabled"].as_bool()), (Some("renamed"), Some(true)), "{got}");
}

#[tokio::test]
async fn a_private_network_opens_to_the_tenant_it_is_assigned_to_and_its_answers_are_not_kept() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), String::new());
        env.insert("HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES".into(), "false".into());
    })
    .await;
    let sink = Sink::start().await;
    sink.set(Behaviour { body: Some(b"an internal service's secrets".to_vec()), ..Default::default() });
    let (other, trusted) = (app.tenant().await, app.tenant().await);
    let (other_app, trusted_app) = (other.application().await, trusted.application().await);
    let refused = |t: &hookgate_tests::app::Tenant<'_>, a: &str| {
        let req = t.req(Method::POST, &format!("/api/v1/app/{a}/endpoint")).json(&json!({"url": sink.url}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(refused(&trusted, &trusted_app).await, 422, "closed by default");
    let assign = |nets: Value| {
        let req = app.admin(Method::PATCH, &format!("/admin/v1/tenant/{}", trusted.id));
        async move { req.json(&json!({"egressAllowNetworks": nets})).send().await.unwrap() }
    };
    assert_eq!(assign(json!(["10.0.0.0/33"])).await.status(), 422, "not a network");
    let res = assign(json!(["127.0.0.1"])).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["egressAllowNetworks"], json!(["127.0.0.1/32"]));
    // Opened to that tenant only.
    trusted.endpoint(&trusted_app, &sink.url, json!({})).await;
    assert_eq!(refused(&other, &other_app).await, 422, "another tenant stays closed");
    let msg = trusted.message(&trusted_app, "x", json!({})).await;
    sink.wait_for(1, WAIT).await;
    let mut attempts = Value::Null;
    for _ in 0..50 {
        attempts = trusted.get(&format!("/api/v1/app/{trusted_app}/attempt/msg/{}", msg["id"].as_str().unwrap())).await;
        if !attempts["data"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let attempt = &attempts["data"][0];
    assert_eq!(attempt["responseStatusCode"], 200, "{attempt}");
    assert_eq!(attempt["response"], "(the response of a private network is not kept)", "{attempt}");
}
