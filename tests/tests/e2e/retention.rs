//! Retention and erasure, checked in the database itself: rows are written, then
//! aged by moving their timestamps back; after each horizon what must be gone is
//! gone (by SQL, not through the API), and what stays answers as
//! docs/retention.md says. Expunged content is absent from a `pg_dump`.

use std::time::Duration;

use hookgate_shared::store::{erasure, retention, retention_stats};
use hookgate_tests::{app::Tenant, servers::pg_dump, sink::Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_retention";

async fn set_retention(app: &TestApp, tenant: &str, retention: Value) -> Value {
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{tenant}"))
        .json(&json!({"retention": retention}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// A message delivered once to the sink, with its attempt recorded.
async fn delivered(t: &Tenant<'_>, app: &str, sink: &Sink, n: usize) -> String {
    let id = t.message(app, "x", json!({"n": n})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(n, Duration::from_secs(10)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while t.get(&format!("/api/v1/app/{app}/attempt/msg/{id}")).await["data"].as_array().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no attempt recorded for {id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    id
}

#[tokio::test]
async fn messages_past_their_tenants_retention_go_with_their_deliveries_and_attempts() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let (short, long) = (app.tenant().await, app.tenant().await);
    let body = set_retention(&app, &short.id, json!({"messageDays": 2})).await;
    assert_eq!(
        body["retention"],
        json!({"inboundDays": null, "messageDays": 2, "effective": {"inboundDays": 30, "messageDays": 2}})
    );
    let (a, b) = (short.application().await, long.application().await);
    short.endpoint(&a, &sink.url, json!({})).await;
    long.endpoint(&b, &sink.url, json!({})).await;
    let old = delivered(&short, &a, &sink, 1).await;
    let fresh = delivered(&short, &a, &sink, 2).await;
    let other = delivered(&long, &b, &sink, 3).await;
    let mut db = app.db.client().await;
    // Three days old: past the short tenant's 2 days, within the other's default 90.
    db.execute(
        "UPDATE messages SET created_at = now() - interval '3 days' WHERE id = ANY($1)",
        &[&vec![old.clone(), other.clone()]],
    )
    .await
    .unwrap();
    // 2 days is shorter than the longest retention (90): row by row.
    assert_eq!(retention::prune_messages(&mut db, 90, 90, 500).await.unwrap(), 1);
    assert_eq!(retention::prune_messages(&mut db, 90, 90, 500).await.unwrap(), 0, "nothing else is due");
    for table in ["messages WHERE id", "deliveries WHERE msg_id", "attempts WHERE msg_id"] {
        assert_eq!(app.count(&format!("SELECT count(*) FROM {table} = $1"), &old).await, 0, "{table}: gone");
        assert_eq!(app.count(&format!("SELECT count(*) FROM {table} = $1"), &fresh).await, 1, "{table}: kept");
        assert_eq!(
            app.count(&format!("SELECT count(*) FROM {table} = $1"), &other).await,
            1,
            "{table}: other tenant's default"
        );
    }
    let res = short.req(Method::GET, &format!("/api/v1/app/{a}/msg/{old}")).send().await.unwrap();
    assert_eq!(res.status(), 404, "a pruned message is not found");
    // Back to the operator's default: `null`.
    let body = set_retention(&app, &short.id, json!({"messageDays": null})).await;
    assert_eq!(body["retention"]["effective"]["messageDays"], 90);
    set_retention(&app, &short.id, json!({"inboundDays": 5, "messageDays": 7})).await;
    let body = set_retention(&app, &short.id, Value::Null).await;
    let defaults =
        json!({"inboundDays": null, "messageDays": null, "effective": {"inboundDays": 30, "messageDays": 90}});
    assert_eq!(body["retention"], defaults, "`retention: null` returns both to the defaults");
}

#[tokio::test]
async fn a_payload_past_its_payload_retention_reads_expired_and_cannot_be_resent() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    for (body, field) in [
        (json!({"eventType": "x", "payload": {}, "payloadRetentionPeriod": 4}), "payloadRetentionPeriod"),
        (json!({"eventType": "x", "payload": {}, "payloadRetentionHours": 0}), "payloadRetentionHours"),
        (
            json!({"eventType": "x", "payload": {}, "payloadRetentionPeriod": 5, "payloadRetentionHours": 1}),
            "mutually exclusive",
        ),
    ] {
        let err = t.post(&format!("/api/v1/app/{a}/msg"), body, 422).await;
        assert!(err["detail"].to_string().contains(field), "{err}");
    }
    let msg = t
        .post(
            &format!("/api/v1/app/{a}/msg"),
            json!({"eventType": "x", "payload": {"secret": 1}, "payloadRetentionPeriod": 5}),
            202,
        )
        .await;
    let id = msg["id"].as_str().unwrap().to_owned();
    let kept = t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "x", "payload": {"n": 2}}), 202).await;
    sink.wait_for(2, Duration::from_secs(10)).await;
    let mut db = app.db.client().await;
    assert_eq!(retention::expire_payloads(&mut db, 500).await.unwrap(), 0, "five days are not up");
    db.execute("UPDATE messages SET payload_expires_at = now() - interval '1 second' WHERE id = $1", &[&id])
        .await
        .unwrap();
    assert_eq!(retention::expire_payloads(&mut db, 500).await.unwrap(), 1);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE id = $1 AND payload IS NULL", &id).await,
        1,
        "the row stays, its payload is gone"
    );
    let kept_id = kept["id"].as_str().unwrap();
    assert_eq!(app.count("SELECT count(*) FROM messages WHERE id = $1 AND payload IS NOT NULL", kept_id).await, 1);
    assert_eq!(t.get(&format!("/api/v1/app/{a}/msg/{id}")).await["payload"], json!({"expired": true}));
    let res = t.req(Method::POST, &format!("/api/v1/app/{a}/msg/{id}/endpoint/{ep}/resend")).send().await.unwrap();
    assert_eq!(res.status(), 409, "an expired payload cannot be resent");
}

#[tokio::test]
async fn inbound_retention_follows_the_source_then_the_tenant_then_the_default() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let inherits =
        t.post("/api/v1/source", json!({"name": "a", "provider": "stripe", "secret": SECRET, "appId": a}), 201).await;
    let own = t
        .post(
            "/api/v1/source",
            json!({"name": "b", "provider": "stripe", "secret": SECRET, "appId": a, "retention": 10}),
            201,
        )
        .await;
    assert_eq!((inherits["retention"].clone(), inherits["retentionInherited"].clone()), (json!(30), json!(true)));
    set_retention(&app, &t.id, json!({"inboundDays": 2})).await;
    let inherits = t.get(&format!("/api/v1/source/{}", inherits["id"].as_str().unwrap())).await;
    assert_eq!(inherits["retention"], 2, "the tenant's setting reaches its sources");
    let own_id = own["id"].as_str().unwrap().to_owned();
    assert_eq!(t.get(&format!("/api/v1/source/{own_id}")).await["retention"], 10, "a source's own setting wins");
    for (source, evt) in [(inherits["id"].as_str().unwrap(), "evt_a"), (own_id.as_str(), "evt_b")] {
        let res = app.send_stripe(source, SECRET, &format!(r#"{{"id":"{evt}","type":"t"}}"#)).await;
        assert_eq!(res.status(), 200);
    }
    let mut db = app.db.client().await;
    hookgate_tests::db::age_inbound_events(&db, "true", 3).await;
    // A sync forward in flight stays while its lease runs; abandoned, it goes too.
    let inherits_id = inherits["id"].as_str().unwrap().to_owned();
    let lease = "UPDATE inbound_events SET status = 'processing', lease_until = now() + $2 * interval '1 minute'
                 WHERE source_id = $1";
    db.execute(lease, &[&inherits_id, &1.0f64]).await.unwrap();
    // The longest window is the default's 30 days: both sources are shorter,
    // so their events go row by row.
    assert_eq!(
        retention::prune_inbound_events(&mut db, 30, 30, 500).await.unwrap(),
        0,
        "a running lease keeps its event"
    );
    assert_eq!(retention::prune_inbound_keys(&db, 30, 500).await.unwrap(), 0, "and its key");
    db.execute(lease, &[&inherits_id, &-1.0f64]).await.unwrap();
    assert_eq!(retention::prune_inbound_events(&mut db, 30, 30, 500).await.unwrap(), 1);
    assert_eq!(retention::prune_inbound_keys(&db, 30, 500).await.unwrap(), 1, "the window of its key ended");
    assert_eq!(
        app.count("SELECT count(*) FROM inbound_events WHERE source_id = $1", &own_id).await,
        1,
        "10 days: kept"
    );
    // `null` returns the source to its tenant's retention.
    let res = t
        .req(Method::PATCH, &format!("/api/v1/source/{own_id}"))
        .json(&json!({"retention": null}))
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!((body["retention"].clone(), body["retentionInherited"].clone()), (json!(2), json!(true)), "{body}");
    assert_eq!(retention::prune_inbound_events(&mut db, 30, 30, 500).await.unwrap(), 1);
    assert_eq!(retention::prune_inbound_keys(&db, 30, 500).await.unwrap(), 1);
    for bad in [json!({"inboundDays": 91}), json!({"messageDays": 0}), json!({"days": 3})] {
        let res = app
            .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", t.id))
            .json(&json!({"retention": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "{bad}");
    }
}

#[tokio::test]
async fn expunged_content_is_gone_from_the_database_so_that_pg_dump_holds_no_byte_of_it() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source = t.stripe_source(&a, SECRET, json!({})).await;
    // Two payloads with markers nothing else contains: one from the API, one through ingress.
    let api_marker = format!("api-marker-{}", ulid::Ulid::new());
    let in_marker = format!("in-marker-{}", ulid::Ulid::new());
    let msg = t.message(&a, "x", json!({"ssn": api_marker})).await["id"].as_str().unwrap().to_owned();
    let body = format!(r#"{{"id":"evt_gdpr","type":"t","ssn":"{in_marker}"}}"#);
    let res = app.send_stripe(&source, SECRET, &body).await;
    let event: Value = res.json().await.unwrap();
    sink.wait_for(2, Duration::from_secs(10)).await;
    // Payloads are `bytea`, which a dump writes in hex: look for both spellings.
    let holds = |dump: &str, marker: &str| dump.contains(marker) || dump.contains(&hex::encode(marker));
    let dump = String::from_utf8_lossy(&pg_dump(&app.db.url)).into_owned();
    assert!(holds(&dump, &api_marker) && holds(&dump, &in_marker), "the dump sees payloads before the expunge");
    let in_msg =
        app.count("SELECT count(*) FROM messages WHERE event_id = $1", event["eventId"].as_str().unwrap()).await;
    assert_eq!(in_msg, 1);
    let in_msg: String = app
        .db
        .client()
        .await
        .query_one("SELECT id FROM messages WHERE event_id = $1", &[&event["eventId"].as_str().unwrap()])
        .await
        .unwrap()
        .get(0);
    for id in [&msg, &in_msg] {
        let res = t.req(Method::DELETE, &format!("/api/v1/app/{a}/msg/{id}/content")).send().await.unwrap();
        assert_eq!(res.status(), 204);
    }
    let dump = String::from_utf8_lossy(&pg_dump(&app.db.url)).into_owned();
    assert!(!holds(&dump, &api_marker), "the API message's payload is gone");
    assert!(!holds(&dump, &in_marker), "the ingress message's payload and its inbound copy are gone");
    assert_eq!(t.get(&format!("/api/v1/app/{a}/msg/{msg}")).await["payload"], json!({"expired": true}));
    let inbound = t.get(&format!("/api/v1/source/{source}/event/{}", event["eventId"].as_str().unwrap())).await;
    assert_eq!(inbound["payload"], json!({"expired": true}), "{inbound}");
    let replay = format!("/api/v1/source/{source}/event/{}/replay", event["eventId"].as_str().unwrap());
    let res = t.req(Method::POST, &replay).send().await.unwrap();
    assert_eq!(res.status(), 409, "expunged content cannot be replayed");
    // An attempt's response body, likewise.
    let attempt = t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await["data"][0].clone();
    let attempt_id = attempt["id"].as_str().unwrap();
    let res =
        t.req(Method::DELETE, &format!("/api/v1/app/{a}/msg/{msg}/attempt/{attempt_id}/content")).send().await.unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(t.get(&format!("/api/v1/app/{a}/msg/{msg}/attempt/{attempt_id}")).await["response"], "EXPUNGED");
    // Another tenant cannot expunge it, nor learn that it exists.
    let stranger = app.tenant().await;
    let res = stranger.req(Method::DELETE, &format!("/api/v1/app/{a}/msg/{msg}/content")).send().await.unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn the_pruners_run_on_their_interval_and_count_what_they_remove() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    // Shorter than the longest retention (the default 90): pruned row by row.
    set_retention(&app, &t.id, json!({"messageDays": 1})).await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let id = delivered(&t, &a, &sink, 1).await;
    let db = app.db.client().await;
    db.execute("UPDATE messages SET created_at = now() - interval '2 days' WHERE id = $1", &[&id]).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while app.count("SELECT count(*) FROM messages WHERE id = $1", &id).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the pruner did not remove the message");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = reqwest::get(app.metrics_url()).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"hookgate_pruned_rows_total{family="messages"} 1"#), "{metrics}");
    // The gauges: sizes, and no pruning lag once the pruner has caught up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = reqwest::get(app.metrics_url()).await.unwrap().text().await.unwrap();
        let bytes = metrics
            .lines()
            .find(|l| l.starts_with(r#"hookgate_table_bytes{family="messages"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok());
        let caught_up = metrics.contains(r#"hookgate_retention_overdue_seconds{family="messages"} 0"#);
        if bytes.is_some_and(|b| b > 0) && caught_up {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "retention gauges missing: {metrics}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_pruning_lag_shows_how_long_the_most_overdue_row_has_waited() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let id = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let db = app.db.client().await;
    db.execute("UPDATE tenants SET message_days = 30 WHERE id = $1", &[&t.id]).await.unwrap();
    db.execute("UPDATE messages SET created_at = now() - interval '31 days' WHERE id = $1", &[&id]).await.unwrap();
    let partitions = hookgate_shared::store::partitions::list(&db).await.unwrap();
    let h = retention_stats::Horizons {
        inbound_default: 30,
        message_default: 90,
        inbound_horizon: 30,
        message_horizon: 90,
        idempotency_ttl: Duration::from_secs(86_400),
        partitions: &partitions,
    };
    let stats = retention_stats::stats(&db, &h).await.unwrap();
    let messages = stats.iter().find(|f| f.family == "messages").unwrap();
    assert!((86_000.0..87_000.0).contains(&messages.overdue), "one day past 30: {messages:?}");
    let inbound = stats.iter().find(|f| f.family == "inbound_events").unwrap();
    assert_eq!((inbound.oldest, inbound.overdue), (None, 0.0), "no inbound events: nothing overdue");
}

#[tokio::test]
async fn erasing_a_customer_removes_its_application_and_everything_under_it() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let (erased, kept) = (t.application().await, t.application().await);
    for a in [&erased, &kept] {
        t.endpoint(a, &sink.url, json!({})).await;
    }
    let source = t.stripe_source(&erased, SECRET, json!({})).await;
    let marker = format!("customer-{}", ulid::Ulid::new());
    let body = format!(r#"{{"id":"evt_erase","type":"t","name":"{marker}"}}"#);
    let res = app.send_stripe(&source, SECRET, &body).await;
    assert_eq!(res.status(), 200);
    // An event admitted for this customer by a source that has since moved to
    // another application is still this customer's.
    let moved = t.stripe_source(&erased, SECRET, json!({"mode": "sync"})).await;
    let res = app.send_stripe(&moved, SECRET, &format!(r#"{{"id":"evt_moved","name":"{marker}"}}"#)).await;
    assert_eq!(res.status(), 200);
    let patch = json!({"appId": kept});
    let res = t.req(Method::PATCH, &format!("/api/v1/source/{moved}")).json(&patch).send().await.unwrap();
    assert_eq!(res.status(), 200);
    for n in 0..3 {
        t.message(&erased, "x", json!({"name": marker, "n": n})).await;
    }
    t.message(&kept, "x", json!({"n": 9})).await;
    sink.wait_for(6, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // attempts recorded
    let res = t.req(Method::DELETE, &format!("/api/v1/app/{erased}")).send().await.unwrap();
    assert_eq!(res.status(), 204);
    for table in ["messages", "deliveries", "attempts", "endpoints", "sources", "inbound_events"] {
        let n = app.count(&format!("SELECT count(*) FROM {table} WHERE app_id = $1"), &erased).await;
        assert_eq!(n, 0, "{table} of the erased application");
        let n = app.count(&format!("SELECT count(*) FROM {table} WHERE app_id = $1"), &kept).await;
        assert!(n > 0 || table == "sources" || table == "inbound_events", "{table} of the other application");
    }
    assert_eq!(app.count("SELECT count(*) FROM applications WHERE id = $1", &erased).await, 0);
    assert_eq!(app.count("SELECT count(*) FROM erasures WHERE app_id = $1", &erased).await, 0);
    let dump = String::from_utf8_lossy(&pg_dump(&app.db.url)).into_owned();
    assert!(!dump.contains(&marker) && !dump.contains(&hex::encode(&marker)), "no byte of the customer's payloads");
    // The operator's call does the same, for the tenant's application it names.
    let stranger = app.tenant().await;
    let res = app.admin(Method::DELETE, &format!("/admin/v1/tenant/{}/app/{kept}", stranger.id)).send().await.unwrap();
    assert_eq!(res.status(), 404, "another tenant's application is not found");
    let res = app.admin(Method::DELETE, &format!("/admin/v1/tenant/{}/app/{kept}", t.id)).send().await.unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(app.count("SELECT count(*) FROM messages WHERE app_id = $1", &kept).await, 0);
}

#[tokio::test]
async fn an_erasure_proceeds_in_bounded_steps_and_the_pruners_finish_it() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let t = app.tenant().await;
    let stepped = t.post("/api/v1/app", json!({"name": "Customer", "uid": "customer-1"}), 201).await;
    let stepped = stepped["id"].as_str().unwrap().to_owned();
    let background = t.application().await;
    for a in [&stepped, &background] {
        for n in 0..5 {
            t.message(a, "x", json!({"n": n})).await;
        }
    }
    let mut db = app.db.client().await;
    let (tenant, caches) =
        (hookgate_shared::TenantId::from_db(t.id.clone()), hookgate_shared::cache::Caches::default());
    let stepped_id = hookgate_shared::ids::AppId::from_db(stepped.clone());
    erasure::request_erasure(&db, &tenant, &stepped_id, &caches).await.unwrap();
    // The uid is free at once: a new application under it is not erased with the old.
    let successor = t.post("/api/v1/app", json!({"name": "Customer", "uid": "customer-1"}), 201).await;
    assert_ne!(successor["id"].as_str().unwrap(), stepped);
    let mut steps = Vec::new();
    loop {
        match erasure::erase_step(&mut db, &tenant, &stepped_id, 2, &caches).await.unwrap() {
            erasure::Erasure::Progress(n) => steps.push(n),
            erasure::Erasure::Done => break,
        }
        assert!(steps.len() < 10);
    }
    assert_eq!(steps, vec![2, 2], "at most a batch per step; the short last one ends it");
    assert_eq!(app.count("SELECT count(*) FROM applications WHERE id = $1", &stepped).await, 0);
    let successors = app.count("SELECT count(*) FROM applications WHERE uid = $1", "customer-1").await;
    assert_eq!(successors, 1, "the successor stays");
    // Requested and left: the pruners finish it.
    erasure::request_erasure(&db, &tenant, &hookgate_shared::ids::AppId::from_db(background.clone()), &caches)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while app.count("SELECT count(*) FROM applications WHERE id = $1", &background).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the pruners did not finish the erasure");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.count("SELECT count(*) FROM messages WHERE app_id = $1", &background).await, 0);
}

/// The FIFO and polling endpoints' log is kept as long as each tenant keeps its
/// messages: past a short retention it goes, within a long one it stays, though
/// both are older than the operator's default.
#[tokio::test]
async fn the_sinks_log_is_pruned_by_each_tenants_own_retention() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
        env.insert("HOOKGATE_RETENTION_MESSAGE_DAYS".into(), "3".into());
    })
    .await;
    let mut logged = Vec::new();
    for days in [1, 30] {
        let t = app.tenant().await;
        set_retention(&app, &t.id, json!({"messageDays": days})).await;
        let a = t.application().await;
        let sink = t
            .post(&format!("/api/v1/app/{a}/destination"), json!({"type": "pollingEndpoint", "config": {}}), 201)
            .await;
        t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "a.b", "payload": {}}), 202).await;
        logged.push((t.id.clone(), sink["id"].as_str().unwrap().to_owned()));
    }
    // Both logs ten days old: past the short retention and the default, within the long one.
    let db = app.db.client().await;
    db.execute("UPDATE sink_log SET created_at = now() - interval '10 days'", &[]).await.unwrap();
    let rows = |tenant: String| {
        let db = &db;
        async move {
            db.query_one("SELECT count(*) FROM sink_log WHERE tenant_id = $1", &[&tenant])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while rows(logged[0].0.clone()).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the short retention's log was not pruned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(rows(logged[1].0.clone()).await, 1, "the long retention's log is kept past the default");
}
