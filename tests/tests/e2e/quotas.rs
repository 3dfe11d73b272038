//! Tenants' quotas and usage, on two instances sharing Postgres and Redis: rate
//! limits that hold across instances while other tenants are served, a daily cap
//! that is exact, ingress refusals a provider retries, and usage that equals
//! what was sent.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hookgate_gateway::Role;
use hookgate_tests::{
    app::Tenant,
    providers,
    sink::{Behaviour, Sink},
    TestApp,
};
use reqwest::Method;
use serde_json::{json, Value};

async fn set_quotas(app: &TestApp, tenant: &str, quotas: Value) -> Value {
    let res = app.admin(Method::PATCH, &format!("/admin/v1/tenant/{tenant}")).json(&json!({ "quotas": quotas })).send();
    let res = res.await.unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// The tenant's usage today, as the operator reads it.
async fn usage_today(app: &TestApp, tenant: &str) -> Value {
    let res = app.admin(Method::GET, &format!("/admin/v1/tenant/{tenant}/usage")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let today = chrono::Utc::now().date_naive().to_string();
    body["data"].as_array().unwrap().iter().find(|d| d["date"] == today.as_str()).cloned().unwrap_or(json!({}))
}

#[tokio::test]
async fn a_tenant_over_its_api_rate_gets_429_with_retry_after_while_another_is_served_on_two_instances() {
    let a = TestApp::spawn().await;
    let b = a.spawn_sibling(Role::All).await;
    let limited = a.tenant().await;
    let other = a.tenant().await;
    set_quotas(&a, &limited.id, json!({ "apiRequestsPerSecond": 5 })).await;
    let started = Instant::now();
    let send = |app: &TestApp, key: &str| app.http.get(app.url("/api/v1/app")).bearer_auth(key.to_owned()).send();
    let limited_calls: Vec<_> = (0..40).map(|i| send(if i % 2 == 0 { &a } else { &b }, &limited.key)).collect();
    let other_calls: Vec<_> = (0..40).map(|i| send(if i % 2 == 0 { &a } else { &b }, &other.key)).collect();
    let (limited_res, other_res) = tokio::join!(join_all(limited_calls), join_all(other_calls));
    let elapsed = started.elapsed().as_secs_f64();
    let mut ok = 0;
    let mut refused = 0;
    for res in limited_res {
        let res = res.unwrap();
        match res.status().as_u16() {
            200 => ok += 1,
            429 => {
                refused += 1;
                let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                assert!((1..=2).contains(&retry), "Retry-After {retry}");
                let body: Value = res.json().await.unwrap();
                assert_eq!(body["code"], "quota_exceeded");
                assert_eq!(body["limit"], "apiRequestsPerSecond");
                assert!(body["detail"].as_str().unwrap().contains("apiRequestsPerSecond"), "{body}");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    // One limit across both instances: a burst of 5, then 5 a second. Per
    // instance, twice that would pass.
    let allowed = 5 + (elapsed * 5.0).ceil() as usize + 1;
    assert!(ok >= 5 && ok <= allowed, "{ok} passed in {elapsed:.2}s (at most {allowed})");
    assert_eq!(ok + refused, 40);
    for res in other_res {
        assert_eq!(res.unwrap().status(), 200, "the other tenant is served normally");
    }
    // The refusals are counted for alerting.
    let metrics = a.http.get(a.metrics_url()).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("hookgate_quota_rejections_total")
            && l.contains(&limited.id)
            && l.contains("api_requests_per_second")),
        "no quota rejection metric"
    );
}

#[tokio::test]
async fn a_daily_message_cap_holds_across_two_instances() {
    let a = TestApp::spawn().await;
    let b = a.spawn_sibling(Role::All).await;
    let t = a.tenant().await;
    let app_id = t.application().await;
    set_quotas(&a, &t.id, json!({ "messagesPerDay": 10 })).await;
    let calls: Vec<_> = (0..30)
        .map(|i| {
            let app = if i % 2 == 0 { &a } else { &b };
            app.http
                .post(app.url(&format!("/api/v1/app/{app_id}/msg")))
                .bearer_auth(&t.key)
                .json(&json!({ "eventType": "order.created", "payload": { "n": i } }))
                .send()
        })
        .collect();
    let mut created = 0;
    for res in join_all(calls).await {
        let res = res.unwrap();
        match res.status().as_u16() {
            202 => created += 1,
            429 => {
                let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                assert!((1..=86_400).contains(&retry), "until the next UTC day: {retry}");
                let body: Value = res.json().await.unwrap();
                assert_eq!(body["limit"], "messagesPerDay");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(created, 10, "exactly the cap is created");
    let listed = t.get(&format!("/api/v1/app/{app_id}/msg?limit=100")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 10, "no more than the cap exists");
    assert_eq!(usage_today(&a, &t.id).await["messagesCreated"], 10);
}

#[tokio::test]
async fn an_ingress_source_over_its_quota_answers_429_and_the_providers_retry_after_the_window_is_admitted_once() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let app_id = t.application().await;
    let source = t.stripe_source(&app_id, "whsec_quota", json!({})).await;
    set_quotas(&app, &t.id, json!({ "inboundPerSecond": 1 })).await;
    let event = |id: &str| json!({ "id": id, "type": "invoice.paid" }).to_string();
    assert_eq!(app.send_stripe(&source, "whsec_quota", &event("evt_1")).await.status(), 200);
    let refused = app.send_stripe(&source, "whsec_quota", &event("evt_2")).await;
    assert_eq!(refused.status(), 429, "the second event within the second is over the quota");
    let retry: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["limit"], "inboundPerSecond");
    tokio::time::sleep(Duration::from_secs(retry)).await;
    let retried = app.send_stripe(&source, "whsec_quota", &event("evt_2")).await;
    assert_eq!(retried.status(), 200);
    assert_eq!(retried.headers()["hookgate-duplicate"], "false", "the retry is admitted");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = app.send_stripe(&source, "whsec_quota", &event("evt_2")).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["hookgate-duplicate"], "true", "and only once");
    let events = t.get(&format!("/api/v1/source/{source}/event")).await;
    assert_eq!(events["data"].as_array().unwrap().len(), 2);
    let usage = wait_for_usage(&app, &t.id, |u| u["inboundRejected"] == 1).await;
    assert_eq!(usage["inboundAccepted"], 2);
    assert_eq!(usage["inboundRejectedByCause"]["quota"], 1);
}

/// Waits until today's usage satisfies `done` (tallies are written each second).
async fn wait_for_usage(app: &TestApp, tenant: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let u = usage_today(app, tenant).await;
        if done(&u) || Instant::now() > deadline {
            return u;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_application_and_endpoint_caps_are_quotas_the_operator_sets_and_resets() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let shown = set_quotas(&app, &t.id, json!({ "appsPerTenant": 1, "endpointsPerApp": 1 })).await;
    assert_eq!(shown["quotas"]["appsPerTenant"], 1);
    assert_eq!(shown["quotas"]["apiRequestsPerSecond"], Value::Null, "unset follows the default");
    assert_eq!(shown["quotas"]["effective"]["endpointsPerApp"], 1);
    assert_eq!(shown["quotas"]["effective"]["apiRequestsPerSecond"], 0, "0 is no limit");
    let app_id = t.application().await;
    let res = t.req(Method::POST, "/api/v1/app").json(&json!({ "name": "second" })).send().await.unwrap();
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("appsPerTenant"));
    let sink = Sink::start().await;
    t.endpoint(&app_id, &sink.url, json!({})).await;
    let res = t
        .req(Method::POST, &format!("/api/v1/app/{app_id}/endpoint"))
        .json(&json!({ "url": sink.url }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("endpointsPerApp"));
    // Bad values are refused by name, and nothing changes.
    for bad in [json!({ "appsPerTenant": -1 }), json!({ "appsPerTenant": 1.5 }), json!({ "bogus": 1 })] {
        let res = app
            .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
            .json(&json!({ "quotas": bad }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "{bad}");
        let text = res.text().await.unwrap();
        assert!(text.contains("quotas."), "{text}");
    }
    // `null` returns every quota to the default: the second application is allowed.
    let reset = set_quotas(&app, &t.id, Value::Null).await;
    assert_eq!(reset["quotas"]["appsPerTenant"], Value::Null);
    t.post("/api/v1/app", json!({ "name": "second" }), 201).await;
}

async fn send_stripe_to(app: &TestApp, source: &str, body: &str) -> u16 {
    app.send_stripe(source, "whsec_usage", body).await.status().as_u16()
}

#[tokio::test]
async fn usage_equals_what_was_sent_after_mixed_traffic_with_duplicates_and_failures_on_two_instances() {
    let a = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_RETRY_SCHEDULE".into(), "1".into());
    })
    .await;
    let b = a.spawn_sibling(Role::All).await;
    let t: Tenant<'_> = a.tenant().await;
    let app_id = t.application().await;
    let good = Sink::start().await;
    let bad = Sink::start().await;
    bad.set(Behaviour { status: 500, ..Behaviour::default() });
    t.endpoint(&app_id, &good.url, json!({})).await;
    t.endpoint(&app_id, &bad.url, json!({})).await;
    let source = t.stripe_source(&app_id, "whsec_usage", json!({})).await;
    let mut bytes_in = 0;
    // 10 inbound events, each sent twice: once to each instance.
    for i in 0..10 {
        let body = json!({ "id": format!("evt_{i}"), "type": "invoice.paid", "n": i }).to_string();
        bytes_in += body.len();
        assert_eq!(send_stripe_to(&a, &source, &body).await, 200);
        assert_eq!(send_stripe_to(&b, &source, &body).await, 200);
    }
    // 3 forged: refused for their signature, by either instance.
    for i in 0..3 {
        let app = if i % 2 == 0 { &a } else { &b };
        let res = app
            .http
            .post(app.url(&format!("/in/{source}")))
            .header("stripe-signature", providers::stripe("whsec_wrong", providers::now(), b"{}"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
    }
    // 5 messages through the API, on both instances.
    for i in 0..5 {
        let app = if i % 2 == 0 { &a } else { &b };
        let payload = json!({ "order": i });
        bytes_in += payload.to_string().len();
        let res = app
            .api(&t.key, Method::POST, &format!("/api/v1/app/{app_id}/msg"))
            .json(&json!({ "eventType": "order.created", "payload": payload }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202);
    }
    // Each of the 15 messages: one success, and two failed attempts (the first and
    // its one retry) at the failing endpoint.
    let usage = wait_for_usage(&a, &t.id, |u| u["attemptsFailed"] == 30 && u["inboundRejected"] == 3).await;
    let expected = json!({
        "date": chrono::Utc::now().date_naive().to_string(),
        "inboundAccepted": 10,
        "inboundDuplicates": 10,
        "inboundRejected": 3,
        "inboundRejectedByCause": { "signature": 3, "invalid": 0, "quota": 0 },
        "messagesCreated": 5,
        "attemptsSucceeded": 15,
        "attemptsFailed": 30,
        "bytesIn": bytes_in,
        "bytesOut": bytes_in * 3,
    });
    assert_eq!(usage, expected);
    // The same through the tenant's own API, and as CSV.
    let own = t.get("/api/v1/usage").await;
    assert_eq!(own["data"][0], expected);
    let csv = t.req(Method::GET, "/api/v1/usage").header("accept", "text/csv").send().await.unwrap();
    assert!(csv.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let text = csv.text().await.unwrap();
    let row = text.lines().nth(1).unwrap();
    assert!(row.ends_with(&format!(",10,10,3,3,0,0,5,15,30,{bytes_in},{}", bytes_in * 3)), "{text}");
    // A bad range names what was wrong.
    let res = t.req(Method::GET, "/api/v1/usage?from=2026-13-01").send().await.unwrap();
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("`from`"));
}

#[tokio::test]
async fn without_redis_each_instance_still_holds_the_rate_itself() {
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
    })
    .await;
    let t = app.tenant().await;
    set_quotas(&app, &t.id, json!({ "apiRequestsPerSecond": 3 })).await;
    let started = Instant::now();
    let calls: Vec<_> = (0..20).map(|_| t.req(Method::GET, "/api/v1/app").send()).collect();
    let statuses: Vec<u16> = join_all(calls).await.into_iter().map(|r| r.unwrap().status().as_u16()).collect();
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let allowed = 3 + (started.elapsed().as_secs_f64() * 3.0).ceil() as usize + 1;
    assert!(ok >= 3 && ok <= allowed, "{ok} passed (at most {allowed}): {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "{statuses:?}");
}

#[tokio::test]
async fn a_429_is_not_kept_under_its_idempotency_key_and_a_far_date_is_refused_not_a_panic() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let app_id = t.application().await;
    set_quotas(&app, &t.id, json!({ "messagesPerSecond": 1 })).await;
    let send = || {
        t.req(Method::POST, &format!("/api/v1/app/{app_id}/msg"))
            .header("idempotency-key", "retry-me")
            .json(&json!({ "eventType": "order.created", "payload": {} }))
            .send()
    };
    t.message(&app_id, "order.created", json!({})).await;
    let refused = send().await.unwrap();
    assert_eq!(refused.status(), 429, "the second message within the second");
    let wait: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(send().await.unwrap().status(), 202, "the retry runs again rather than replaying the 429");
    for range in ["to=-262143-01-01", "from=+262142-12-31&to=+262142-12-31", "from=2026-02-30"] {
        let res = t.req(Method::GET, &format!("/api/v1/usage?{range}")).send().await.unwrap();
        assert_eq!(res.status(), 422, "{range}");
        assert!(res.text().await.unwrap().contains("YYYY-MM-DD"), "{range}");
    }
}

#[tokio::test]
async fn a_customer_looping_in_the_portal_does_not_spend_its_tenants_own_api_rate() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let app_id = t.application().await;
    let access = t.post(&format!("/api/v1/auth/app-portal-access/{app_id}"), json!({}), 200).await;
    let token = access["token"].as_str().unwrap().to_owned();
    set_quotas(&app, &t.id, json!({ "apiRequestsPerSecond": 3 })).await;
    let portal: Vec<_> =
        (0..15).map(|_| app.api(&token, Method::GET, &format!("/api/v1/app/{app_id}/endpoint")).send()).collect();
    let portal: Vec<u16> = join_all(portal).await.into_iter().map(|r| r.unwrap().status().as_u16()).collect();
    assert!(portal.contains(&429), "the portal's own bucket runs out: {portal:?}");
    // The tenant's key still has its whole burst.
    for _ in 0..3 {
        assert_eq!(t.req(Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);
    }
}

#[tokio::test]
async fn past_days_usage_shards_fold_into_one_row_and_the_sums_stay() {
    use hookgate_shared::{ids::TenantId, store::usage};
    let db = hookgate_tests::TestDb::new().await;
    let client = db.client().await;
    let tenant = TenantId::generate();
    // Three days ago over five shards (one already folded), yesterday over two.
    for (days_ago, shard, accepted, bytes) in
        [(3, 0, 1, 10), (3, 4, 2, 20), (3, 9, 3, 30), (3, 63, 4, 40), (1, 5, 5, 50), (1, 7, 6, 60)]
    {
        client
            .execute(
                "INSERT INTO usage_days (tenant_id, day, shard, inbound_accepted, bytes_in)
                 VALUES ($1, (now() AT TIME ZONE 'UTC')::date - $2::int, $3, $4, $5)",
                &[&tenant.as_str(), &days_ago, &(shard as i16), &(accepted as i64), &(bytes as i64)],
            )
            .await
            .unwrap();
    }
    let today = chrono::Utc::now().date_naive();
    let span = (today - chrono::Days::new(5), today);
    let before = usage::days(&client, &tenant, span.0, span.1).await.unwrap();
    assert_eq!(usage::compact(&client, 2).await.unwrap(), 2, "a batch at a time");
    assert_eq!(usage::compact(&client, 100).await.unwrap(), 1);
    assert_eq!(usage::compact(&client, 100).await.unwrap(), 0);
    assert_eq!(usage::days(&client, &tenant, span.0, span.1).await.unwrap(), before, "the sums stay");
    let rows: Vec<(i32, i64)> = client
        .query(
            "SELECT ((now() AT TIME ZONE 'UTC')::date - day)::int, count(*) FROM usage_days WHERE tenant_id = $1
             GROUP BY day ORDER BY day",
            &[&tenant.as_str()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, vec![(3, 1), (1, 2)], "three days ago is one row; yesterday is left alone");
    assert_eq!(before[0].inbound_accepted, 10);
    assert_eq!(before[0].bytes_in, 100);
}

#[tokio::test]
async fn refused_messages_take_no_place_under_the_daily_cap_and_test_events_take_one() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let app_id = t.application().await;
    let sink = Sink::start().await;
    let ep = t.endpoint(&app_id, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    set_quotas(&app, &t.id, json!({ "messagesPerDay": 3 })).await;
    let send = |body: Value| {
        app.http.post(app.url(&format!("/api/v1/app/{app_id}/msg"))).bearer_auth(&t.key).json(&body).send()
    };
    // Ten refusals, each for a reason found after the quota used to be taken.
    for i in 0..10 {
        let bad = match i % 3 {
            0 => json!({"eventType": "a", "payload": {}, "payloadRetentionPeriod": 1}),
            1 => json!({"eventType": "a", "payload": {}, "payloadRetentionPeriod": 5, "payloadRetentionHours": 5}),
            _ => json!({"eventType": "a", "payload": {}, "application": {"name": "x", "throttleRate": 0}}),
        };
        assert_eq!(send(bad).await.unwrap().status(), 422, "refusal {i}");
    }
    assert_eq!(
        send(json!({"eventType": "a", "payload": {}})).await.unwrap().status(),
        202,
        "the refusals took no place"
    );
    // A test event counts like any message, portal link or not.
    let example = |key: &str| {
        let url = app.url(&format!("/api/v1/app/{app_id}/endpoint/{ep}/send-example"));
        app.http.post(url).bearer_auth(key).json(&json!({})).send()
    };
    assert_eq!(example(&t.key).await.unwrap().status(), 202);
    let portal = t.post(&format!("/api/v1/auth/app-portal-access/{app_id}"), json!({}), 200).await;
    let token = portal["token"].as_str().unwrap().to_owned();
    assert_eq!(example(&token).await.unwrap().status(), 202);
    assert_eq!(example(&token).await.unwrap().status(), 429, "the day's places are gone");
    assert_eq!(send(json!({"eventType": "a", "payload": {}})).await.unwrap().status(), 429);
    assert_eq!(usage_today(&app, &t.id).await["messagesCreated"], 3);
}
