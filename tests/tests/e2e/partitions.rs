//! Time partitions: made ahead by every process, a row in the partition of its
//! id's day, whole partitions dropped once past the longest retention in effect
//! (checked by SQL), and a provider's key admitted anew after its event's
//! partition went.

use std::time::{Duration, Instant};

use chrono::{Duration as Days, Utc};
use hookgate_shared::{
    ids,
    store::partitions::{self, day_of, FAMILIES},
};
use hookgate_tests::{sink::Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_partitions";

async fn partition_of(app: &TestApp, table: &str, column: &str, id: &str) -> String {
    let sql = format!("SELECT tableoid::regclass::text FROM {table} WHERE {column} = $1");
    app.db.client().await.query_one(&sql, &[&id]).await.unwrap().get(0)
}

async fn exists(app: &TestApp, table: &str) -> bool {
    let row = app.db.client().await.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await.unwrap();
    row.get(0)
}

async fn wait_until_dropped(app: &TestApp, table: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while exists(app, table).await {
        assert!(Instant::now() < deadline, "{table} was not dropped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Makes the partitions of the day `days_ago` days back for every family.
async fn old_partitions(app: &TestApp, days_ago: i64) -> String {
    let db = app.db.client().await;
    let day = day_of(Utc::now()) - Days::days(days_ago);
    for family in &FAMILIES {
        partitions::create(&db, family, day, day + Days::days(1)).await.unwrap();
    }
    day.format("%Y%m%d").to_string()
}

#[tokio::test]
async fn the_database_and_rust_agree_on_the_lowest_id_of_an_instant() {
    let app = TestApp::spawn().await;
    let db = app.db.client().await;
    let mut instants = vec![0i64, 1, 1_764_720_000_000, 1_764_720_000_999, 253_402_300_799_999];
    // A spread of instants over the years ULIDs cover, at odd milliseconds.
    instants.extend((0..200i64).map(|i| i * 1_234_567_890_123 % 253_402_300_799_999 + i));
    for ms in instants {
        let at = chrono::DateTime::from_timestamp_millis(ms).unwrap();
        let sql: String = db.query_one("SELECT hookgate_id_floor('msg', $1)", &[&at]).await.unwrap().get(0);
        assert_eq!(sql, ids::floor("msg", at), "at {at}");
    }
}

#[tokio::test]
async fn partitions_are_made_ahead_and_a_message_lives_with_its_deliveries_in_its_days_partitions() {
    let sink = Sink::start().await;
    let app = TestApp::spawn().await;
    let db = app.db.client().await;
    let list = partitions::list(&db).await.unwrap();
    let today = day_of(Utc::now());
    for family in &FAMILIES {
        let mine: Vec<_> = list.iter().filter(|p| p.family == family.table).collect();
        for d in -2..=7 {
            let day = today + Days::days(d);
            assert!(
                mine.iter().any(|p| p.from.is_none_or(|f| f <= day) && p.to > day),
                "{} has no partition for {day}: {mine:?}",
                family.table
            );
        }
    }
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await["data"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no attempt recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let day = today.format("%Y%m%d");
    assert_eq!(partition_of(&app, "messages", "id", &msg).await, format!("messages_p{day}"));
    assert_eq!(partition_of(&app, "deliveries", "msg_id", &msg).await, format!("deliveries_p{day}"));
    assert_eq!(partition_of(&app, "attempts", "msg_id", &msg).await, format!("attempts_p{day}"));
    // Making them again makes nothing: every day up to the end is there.
    let until = Utc::now() + Days::days(7);
    assert_eq!(partitions::ensure(&db, &FAMILIES[2], Utc::now(), until, 1).await.unwrap(), 0);
}

#[tokio::test]
async fn a_key_whose_events_partition_was_dropped_is_admitted_again_as_a_new_event() {
    let sink = Sink::start().await;
    // No Redis: its entry for the key expires after the same window, by its TTL,
    // which this test cannot age.
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let source = t.stripe_source(&a, SECRET, json!({})).await;
    let body = r#"{"id":"evt_returning","type":"invoice.paid"}"#;
    let first: Value = app.send_stripe(&source, SECRET, body).await.json().await.unwrap();
    assert_eq!(first["status"], "accepted");
    sink.wait_for(1, Duration::from_secs(10)).await;
    // A source keeping 90 days holds the old partition back while the row moves in.
    let holder = t
        .post(
            "/api/v1/source",
            json!({"name": "h", "provider": "stripe", "secret": SECRET, "appId": a, "retention": 90}),
            201,
        )
        .await;
    // The event as if received 40 days ago, past the 30-day window: its row moves
    // to that day's partition (its id is of that day) and its key ages with it.
    let day = old_partitions(&app, 40).await;
    let old_id = ids::InboundEventId::generated_at(Utc::now() - Days::days(40));
    let db = app.db.client().await;
    let moved = db
        .execute(
            "UPDATE inbound_events SET id = $2, received_at = now() - interval '40 days' WHERE id = $1",
            &[&first["eventId"].as_str().unwrap(), &old_id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    db.execute(
        "UPDATE inbound_keys SET event_id = $2, received_at = now() - interval '40 days' WHERE event_id = $1",
        &[&first["eventId"].as_str().unwrap(), &old_id.as_str()],
    )
    .await
    .unwrap();
    assert_eq!(partition_of(&app, "inbound_events", "id", old_id.as_str()).await, format!("inbound_events_p{day}"));
    let res = t
        .req(Method::PATCH, &format!("/api/v1/source/{}", holder["id"].as_str().unwrap()))
        .json(&json!({"retention": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The pruners end the key's window and the maintenance drops the partition.
    wait_until_dropped(&app, &format!("inbound_events_p{day}")).await;
    let keys: i64 = db.query_one("SELECT count(*) FROM inbound_keys", &[]).await.unwrap().get(0);
    assert_eq!(keys, 0, "the key's window ended");
    let rows: i64 =
        db.query_one("SELECT count(*) FROM inbound_events WHERE id = $1", &[&old_id.as_str()]).await.unwrap().get(0);
    assert_eq!(rows, 0, "the event went with its partition");
    // The provider sends the same event again: a new event, delivered again.
    let again: Value = app.send_stripe(&source, SECRET, body).await.json().await.unwrap();
    assert_eq!(again["status"], "accepted", "{again}");
    assert_ne!(again["eventId"], first["eventId"]);
    assert_eq!(again["key"], first["key"], "the same idempotency key");
    sink.wait_for(2, Duration::from_secs(10)).await;
    let received = sink.received();
    assert_eq!(
        received[0].header("idempotency-key"),
        received[1].header("idempotency-key"),
        "both deliveries carry the provider's key for receivers that dedupe on it"
    );
    let metrics = reqwest::get(app.metrics_url()).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"hookgate_partitions_dropped_total{family="inbound_events"} 1"#), "{metrics}");
}

#[tokio::test]
async fn a_message_partition_goes_whole_once_past_the_longest_retention_and_not_before() {
    let sink = Sink::start().await;
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({})).await;
    let msg = t
        .post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "x", "eventId": "order-1", "payload": {}}), 202)
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    sink.wait_for(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await["data"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no attempt recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Another tenant keeps its messages 120 days: a partition 100 days old holds
    // rows that tenant may still have, so it stays.
    let keeper = app.tenant().await;
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", keeper.id))
        .json(&json!({"retention": {"messageDays": 120}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let day = old_partitions(&app, 100).await;
    let old = ids::MessageId::generated_at(Utc::now() - Days::days(100));
    let db = app.db.client().await;
    for (table, column) in
        [("messages", "id"), ("deliveries", "msg_id"), ("attempts", "msg_id"), ("message_event_ids", "msg_id")]
    {
        let sql = format!("UPDATE {table} SET {column} = $2 WHERE {column} = $1");
        assert_eq!(db.execute(&sql, &[&msg, &old.as_str()]).await.unwrap(), 1, "{table}");
    }
    for table in ["messages", "deliveries", "attempts"] {
        let column = if table == "messages" { "id" } else { "msg_id" };
        assert_eq!(partition_of(&app, table, column, old.as_str()).await, format!("{table}_p{day}"));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists(&app, &format!("messages_p{day}")).await, "kept while a tenant's retention reaches it");
    // The eventId is still taken meanwhile.
    t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "x", "eventId": "order-1", "payload": {}}), 409).await;
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{}", keeper.id))
        .json(&json!({"retention": {"messageDays": null}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    for table in ["attempts", "deliveries", "messages"] {
        wait_until_dropped(&app, &format!("{table}_p{day}")).await;
    }
    for table in
        ["messages WHERE id", "deliveries WHERE msg_id", "attempts WHERE msg_id", "message_event_ids WHERE msg_id"]
    {
        let n: i64 =
            db.query_one(&format!("SELECT count(*) FROM {table} = $1"), &[&old.as_str()]).await.unwrap().get(0);
        assert_eq!(n, 0, "{table}: gone with the partition");
    }
    // Its eventId is free again, as after any message's retention.
    t.post(&format!("/api/v1/app/{a}/msg"), json!({"eventType": "x", "eventId": "order-1", "payload": {}}), 202).await;
}

async fn set_message_days(app: &TestApp, tenant: &str, days: Value) {
    let res = app
        .admin(Method::PATCH, &format!("/admin/v1/tenant/{tenant}"))
        .json(&json!({"retention": {"messageDays": days}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// An app whose maintenance runs every second; a tenant keeping messages 120
/// days (its id returned); and a message of another tenant's in the partition
/// of the day 100 days back (its partition's name and the message's id).
async fn kept_old_message() -> (TestApp, String, String, ids::MessageId) {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
    })
    .await;
    let (t, keeper) = (app.tenant().await, app.tenant().await);
    let a = t.application().await;
    set_message_days(&app, &keeper.id, json!(120)).await;
    let day = old_partitions(&app, 100).await;
    let old = ids::MessageId::generated_at(Utc::now() - Days::days(100));
    app.db
        .client()
        .await
        .execute(
            "INSERT INTO messages (tenant_id, app_id, id, event_type, payload) VALUES ($1, $2, $3, 'x', '\\x7b7d')",
            &[&t.id, &a, &old.as_str()],
        )
        .await
        .unwrap();
    let keeper = keeper.id.clone();
    (app, keeper, format!("messages_p{day}"), old)
}

#[tokio::test]
async fn a_detach_left_pending_is_finished_and_attached_again_while_a_retention_still_covers_it() {
    let (app, keeper, name, old) = kept_old_message().await;
    let db = app.db.client().await;
    // A detach cut off in its second phase (it waits for a transaction that has
    // the table open; its statement bound runs out): left pending.
    let holder = app.db.client().await;
    holder.batch_execute("BEGIN; SELECT count(*) FROM messages").await.unwrap();
    let detacher = app.db.client().await;
    detacher.batch_execute("SET statement_timeout = '1s'").await.unwrap();
    let cut = detacher.batch_execute(&format!("ALTER TABLE messages DETACH PARTITION {name} CONCURRENTLY")).await;
    assert!(cut.is_err(), "the detach was cut off");
    // Pending while the holder's transaction lasts (finishing the detach waits for it too).
    let pending = partitions::list(&db).await.unwrap().into_iter().find(|p| p.name == name).unwrap();
    assert!(pending.detach_pending, "{pending:?}");
    let hidden: i64 =
        db.query_one("SELECT count(*) FROM messages WHERE id = $1", &[&old.as_str()]).await.unwrap().get(0);
    assert_eq!(hidden, 0, "a pending detach hides its rows");
    holder.batch_execute("COMMIT").await.unwrap();
    // Maintenance finishes it, and since a tenant keeps 120 days, attaches it again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = partitions::list(&db).await.unwrap().into_iter().find(|p| p.name == name);
        if p.is_some_and(|p| !p.detach_pending) {
            break;
        }
        assert!(Instant::now() < deadline, "the pending detach was not finished and attached again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seen: i64 = db.query_one("SELECT count(*) FROM messages WHERE id = $1", &[&old.as_str()]).await.unwrap().get(0);
    assert_eq!(seen, 1, "its rows are visible again through the parent");
    // Once no retention covers it any more, it goes as any other.
    set_message_days(&app, &keeper, Value::Null).await;
    wait_until_dropped(&app, &name).await;
}

#[tokio::test]
async fn a_table_a_failed_round_left_detached_is_attached_again_while_a_retention_covers_it() {
    let (app, _keeper, name, old) = kept_old_message().await;
    let db = app.db.client().await;
    // As a round leaves it that labelled and detached it, then failed (its archive
    // unreachable, its process killed) after the tenant's retention had grown.
    let p = partitions::list(&db).await.unwrap().into_iter().find(|p| p.name == name).unwrap();
    hookgate_shared::store::partition_export::label(&db, &name, "messages", p.from, p.to).await.unwrap();
    db.batch_execute(&format!("ALTER TABLE messages DETACH PARTITION {name}")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !partitions::list(&db).await.unwrap().iter().any(|p| p.name == name) {
        assert!(Instant::now() < deadline, "the detached table was not attached again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seen: i64 = db.query_one("SELECT count(*) FROM messages WHERE id = $1", &[&old.as_str()]).await.unwrap().get(0);
    assert_eq!(seen, 1, "kept, and visible again: a tenant's retention still covers it");
}

/// Postgres plans from a table's statistics and keeps a generic plan until they
/// change; autovacuum refreshes them a minute or more late. A partition that
/// doubled since it was last analyzed is analyzed again (and its plans remade),
/// and one that did not is left alone.
#[tokio::test]
async fn a_partition_that_doubled_since_its_last_analysis_is_analyzed_again() {
    let test_db = hookgate_tests::TestDb::new().await;
    let env = hookgate_tests::app::default_env(&test_db);
    // No worker in this process: the test calls what the worker's loop calls.
    let app = TestApp::spawn_role(test_db, env.clone(), hookgate_gateway::Role::Api).await;
    let t = app.tenant().await;
    let a = t.application().await;
    let msg = t.message(&a, "x", json!({})).await["id"].as_str().unwrap().to_owned();
    let part = partition_of(&app, "messages", "id", &msg).await;
    let db = app.db.client().await;
    // Autovacuum analyzing it meanwhile would do the work this test looks for.
    db.batch_execute(&format!("ALTER TABLE {part} SET (autovacuum_enabled = off); ANALYZE {part}")).await.unwrap();
    let config = hookgate_shared::Config::from_sources(None, &env).unwrap();
    let state = hookgate_shared::AppState::new(config).unwrap();
    let mut conn = hookgate_shared::db::conn(&state.db).await.unwrap();
    let reltuples = |part: String| {
        let db = &db;
        async move {
            db.query_one("SELECT reltuples::bigint FROM pg_class WHERE relname = $1", &[&part])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    assert_eq!(reltuples(part.clone()).await, 1);
    let stale = partitions::analyze_stale(&mut conn, 100).await.unwrap();
    assert!(!stale.contains(&part), "analyzed a partition whose statistics are current: {stale:?}");
    // 700 more rows in the same day's partition (ids after the first one's).
    db.batch_execute(&format!(
        "INSERT INTO messages (tenant_id, app_id, id, event_type, payload, content_type)
         SELECT tenant_id, app_id, id || lpad(g::text, 4, '0'), event_type, payload, content_type
         FROM messages, generate_series(1, 700) g WHERE id = '{msg}';
         SELECT pg_stat_force_next_flush();"
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let stale = loop {
        let stale = partitions::analyze_stale(&mut conn, 100).await.unwrap();
        if stale.contains(&part) || Instant::now() > deadline {
            break stale;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(stale.contains(&part), "the partition grew from 1 row to 701 and was not analyzed: {stale:?}");
    assert_eq!(reltuples(part.clone()).await, 701);
    let again = partitions::analyze_stale(&mut conn, 100).await.unwrap();
    assert!(!again.contains(&part), "analyzed again with nothing changed: {again:?}");
}
