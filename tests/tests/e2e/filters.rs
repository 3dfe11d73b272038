//! Content filters: an endpoint (or a destination) takes a message only if its
//! payload passes the endpoint's filter, judged by Postgres in the statement
//! that fans the message out, on every path that makes deliveries.

use std::time::Duration;

use hookgate_shared::{filter::Filter, store::fanout};
use hookgate_tests::{sink::Sink, TestApp, TestDb};
use reqwest::Method;
use serde_json::{json, Value};

async fn passes(db: &tokio_postgres::Client, filter: &str, payload: &[u8]) -> bool {
    let f = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
    fanout::filter_passes(db, payload, &f.path).await.unwrap()
}

#[tokio::test]
async fn a_filter_is_judged_by_postgres_as_the_docs_say() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let order = br#"{"amount": 150, "currency": "EUR", "status": "paid", "tags": ["vip", "b2b"],
        "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 9}], "customer": {"id": "c\"1"},
        "headers": {"content-type": "json"}, "note": null, "price": "120"}"#;
    let cases: &[(&str, bool)] = &[
        ("amount > 100", true),
        ("amount > 150", false),
        ("amount >= 150 and currency == 'EUR'", true),
        ("currency in ['USD', 'GBP']", false),
        ("currency not in ['USD', 'GBP']", true),
        ("amount < 100 or status = \"paid\"", true),
        ("not (amount < 100 or status == 'paid')", false),
        // Arrays: any item.
        ("tags == 'vip'", true),
        ("tags == 'retail'", false),
        ("items[*].qty > 5", true),
        ("items[0].qty > 5", false),
        ("items[1].sku == 'B-2'", true),
        // A missing path: false, and its `not` true.
        ("refund.amount > 0", false),
        ("not refund.amount > 0", true),
        ("exists(customer.id)", true),
        ("not exists(refund)", true),
        // Different types: neither, so not passed either way.
        ("price > 100", false),
        ("not price > 100", false),
        ("price == '120'", true),
        // Quotes and keys that are no names.
        ("customer.id == 'c\"1'", true),
        ("headers['content-type'] == 'json'", true),
        ("note == null", true),
    ];
    for (filter, expected) in cases {
        assert_eq!(passes(&c, filter, order).await, *expected, "{filter}");
    }
    // A payload that is not JSON passes no filter, and fails no statement.
    assert!(!passes(&c, "amount > 1", b"not json").await);
    assert!(!passes(&c, "not amount > 1", b"\xff\xfe").await);
}

#[tokio::test]
async fn an_endpoint_with_a_filter_receives_only_the_messages_it_passes_on_every_path() {
    let app = TestApp::spawn().await;
    let (big, all) = (Sink::start().await, Sink::start().await);
    let t = app.tenant().await;
    let a = t.application().await;
    let filtered = t.endpoint(&a, &big.url, json!({"filter": "amount > 100"})).await;
    assert_eq!(filtered["filter"], "amount > 100");
    let plain = t.endpoint(&a, &all.url, json!({})).await;
    assert!(plain.get("filter").is_none(), "no filter, no field: {plain}");
    // The API, one message at a time and in a batch of concurrent creations.
    for amount in [json!(50), json!(150), json!("200"), json!(101)] {
        t.message(&a, "order.paid", json!({ "amount": amount })).await;
    }
    let batch = (0..8).map(|n| t.message(&a, "order.paid", json!({ "amount": n * 30 })));
    futures_util::future::join_all(batch).await;
    // Ingress: a Stripe source, async and sync.
    const SECRET: &str = "whsec_filter_test_secret";
    for mode in ["async", "sync"] {
        let source = t.stripe_source(&a, SECRET, json!({"name": mode, "mode": mode})).await;
        for amount in [99, 500] {
            let event = format!(r#"{{"id": "evt_{mode}_{amount}", "type": "charge.succeeded", "amount": {amount}}}"#);
            let res = app.send_stripe(&source, SECRET, &event).await;
            assert_eq!(res.status(), 200, "{mode}: {}", res.text().await.unwrap());
        }
    }
    let wait = Duration::from_secs(20);
    all.wait_for(16, wait).await;
    big.wait_for(7, wait).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut amounts: Vec<i64> = big
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["amount"].as_i64().unwrap())
        .collect();
    amounts.sort();
    // 150, 101; the batch's 120, 150, 180, 210; the two providers' 500s. Not "200": a string.
    assert_eq!(amounts, [101, 120, 150, 150, 180, 210, 500, 500]);
    assert_eq!(all.received().len(), 16);
    // No delivery was made for what it refused, not one merely not sent yet.
    let c = app.db.client().await;
    let id = filtered["id"].as_str().unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM deliveries WHERE endpoint_id = $1", &[&id]).await.unwrap().get(0);
    // The API's six and the async event's one: a sync forward makes none.
    assert_eq!(n, 7);
}

#[tokio::test]
async fn a_filter_is_checked_when_saved_shown_back_kept_by_a_patch_and_removed_by_a_null() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let endpoints = format!("/api/v1/app/{a}/endpoint");
    let refused = t.post(&endpoints, json!({"url": "https://example.com/h", "filter": "amount >"}), 422).await;
    let refused = hookgate_tests::error_text(&refused);
    assert!(refused.contains("`filter` at 8: expected a value"), "{refused}");
    let long = "a == 1 or ".repeat(200);
    let refused = t.post(&endpoints, json!({"url": "https://example.com/h", "filter": long}), 422).await;
    assert!(hookgate_tests::error_text(&refused).contains("at most 1024 bytes"), "{refused}");
    let ep = t.endpoint(&a, "https://example.com/h", json!({"filter": "kind == 'a'"})).await;
    let path = format!("/api/v1/app/{a}/endpoint/{}", ep["id"].as_str().unwrap());
    let patched = patch(&t, &path, json!({"description": "kept"})).await;
    assert_eq!(patched["filter"], "kind == 'a'", "a PATCH that does not name it keeps it");
    let patched = patch(&t, &path, json!({"filter": "kind == 'b'"})).await;
    assert_eq!(t.get(&path).await["filter"], "kind == 'b'", "{patched}");
    // A PUT that does not name it (as Svix's SDKs send one) keeps it; `null` removes it.
    let put = |body: Value| {
        let req = t.req(Method::PUT, &path).json(&body);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let replaced = put(json!({"url": "https://example.com/h2"})).await;
    assert_eq!(replaced["filter"], "kind == 'b'", "{replaced}");
    let replaced = put(json!({"url": "https://example.com/h2", "filter": null})).await;
    assert!(replaced.get("filter").is_none(), "{replaced}");
    patch(&t, &path, json!({"filter": "kind == 'b'"})).await;
    let patched = patch(&t, &path, json!({"filter": null})).await;
    assert!(patched.get("filter").is_none(), "{patched}");
    // A destination's, alike.
    let d = t
        .post(
            &format!("/api/v1/app/{a}/destination"),
            json!({"type": "pollingEndpoint", "config": {}, "filter": "n >= 2"}),
            201,
        )
        .await;
    assert_eq!(d["filter"], "n >= 2");
    let bad = json!({"type": "pollingEndpoint", "config": {}, "filter": "n >= two"});
    let res = t.req(Method::POST, &format!("/api/v1/app/{a}/destination")).json(&bad).send().await.unwrap();
    assert_eq!(res.status(), 422);
    // The polling endpoint's log holds only what passed.
    for n in 0..4 {
        t.message(&a, "x", json!({ "n": n })).await;
    }
    let sink = d["id"].as_str().unwrap();
    let c = app.db.client().await;
    let rows = c
        .query(
            "SELECT m.payload FROM sink_log l JOIN messages m ON m.tenant_id = l.tenant_id AND m.id = l.msg_id
             WHERE l.endpoint_id = $1 ORDER BY l.msg_id",
            &[&sink],
        )
        .await
        .unwrap();
    let ns: Vec<i64> =
        rows.iter().map(|r| serde_json::from_slice::<Value>(r.get(0)).unwrap()["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, [2, 3]);
}

#[tokio::test]
async fn the_try_route_judges_a_payload_as_the_fan_out_does_and_stays_in_its_tenant() {
    let app = TestApp::spawn().await;
    let (t, other) = (app.tenant().await, app.tenant().await);
    let a = t.application().await;
    let route = format!("/api/v1/app/{a}/filter/try");
    let tried = t.post(&route, json!({"filter": "tags == 'vip'", "payload": {"tags": ["b2b", "vip"]}}), 200).await;
    assert_eq!(tried, json!({"matches": true}));
    let tried = t.post(&route, json!({"filter": "amount > 1", "payload": {"amount": "2"}}), 200).await;
    assert_eq!(tried, json!({"matches": false}));
    let refused = t.post(&route, json!({"filter": "amount ~ 1", "payload": {}}), 422).await;
    assert!(hookgate_tests::error_text(&refused).contains("`filter` at 7"), "{refused}");
    let big = json!({"filter": "a == 1", "payload": {"x": "y".repeat(300 * 1024)}});
    t.post(&route, big, 422).await;
    other.post(&route, json!({"filter": "a == 1", "payload": {}}), 404).await;
}

/// Replay-missing sends an endpoint the messages it never got that its filters
/// take, the content filter among them: not the ones it refused.
#[tokio::test]
async fn replay_missing_sends_only_the_messages_the_filter_passes() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let since = chrono::Utc::now() - chrono::Duration::seconds(5);
    for n in 0..6 {
        t.message(&a, "x", json!({ "n": n })).await;
    }
    // Made after the messages: it never got them.
    let ep = t.endpoint(&a, &sink.url, json!({"filter": "n >= 4"})).await;
    let id = ep["id"].as_str().unwrap();
    let body = json!({"since": since.to_rfc3339()});
    t.post(&format!("/api/v1/app/{a}/endpoint/{id}/replay-missing"), body, 202).await;
    sink.wait_for(2, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut ns: Vec<i64> = sink
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["n"].as_i64().unwrap())
        .collect();
    ns.sort();
    assert_eq!(ns, [4, 5]);
}

async fn patch(t: &hookgate_tests::app::Tenant<'_>, path: &str, body: Value) -> Value {
    let res = t.req(Method::PATCH, path).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 200, "PATCH {path}");
    res.json().await.unwrap()
}
