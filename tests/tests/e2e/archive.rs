//! The cold archive: a partition past its horizon is archived to a directory
//! before it is dropped, and `hookgate archive list|show` reads back what it
//! held (count and rows compared with the table's before the drop). Expunged
//! content is not in it, nor any row of a customer whose erasure was requested.

use std::{collections::BTreeMap, time::Duration};

use chrono::{Duration as Days, Utc};
use hookgate_shared::{
    ids::InboundEventId,
    store::partitions::{self, day_of},
};
use hookgate_tests::{process::hookgate, sink::Sink, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const SECRET: &str = "whsec_archive";

async fn cli(args: &[&str]) -> String {
    let out = hookgate(&[]).args(args).output().await.unwrap();
    assert!(out.status.success(), "hookgate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_partition_is_archived_before_its_drop_and_reads_back_row_for_row() {
    let dir = std::env::temp_dir().join(format!("hookgate-archive-{}", ulid::Ulid::new()));
    let url = format!("file://{}", dir.display());
    let sink = Sink::start().await;
    let app = TestApp::spawn_with(|env| {
        env.remove("REDIS_URL");
        env.insert("HOOKGATE_PRUNE_INTERVAL_SECS".into(), "1".into());
        env.insert("HOOKGATE_ARCHIVE_URL".into(), url.clone());
    })
    .await;
    let t = app.tenant().await;
    let (kept, erased) = (t.application().await, t.application().await);
    t.endpoint(&kept, &sink.url, json!({})).await;
    t.endpoint(&erased, &sink.url, json!({})).await;
    let (source, doomed_source) =
        (t.stripe_source(&kept, SECRET, json!({})).await, t.stripe_source(&erased, SECRET, json!({})).await);
    let mut received = Vec::new();
    for n in 0..5 {
        let body = format!(r#"{{"id":"evt_archived_{n}","type":"invoice.paid","n":{n}}}"#);
        let res: Value = app.send_stripe(&source, SECRET, &body).await.json().await.unwrap();
        received.push(res["eventId"].as_str().unwrap().to_owned());
    }
    // One whose content the tenant expunged, and one of a customer being erased.
    let marker = format!("secret-{}", ulid::Ulid::new());
    let body = format!(r#"{{"id":"evt_expunged","type":"invoice.paid","ssn":"{marker}"}}"#);
    let expunged: Value = app.send_stripe(&source, SECRET, &body).await.json().await.unwrap();
    let body = format!(r#"{{"id":"evt_erased","type":"invoice.paid","name":"{marker}"}}"#);
    let erased_event: Value = app.send_stripe(&doomed_source, SECRET, &body).await.json().await.unwrap();
    sink.wait_for(7, Duration::from_secs(10)).await;
    let db = app.db.client().await;
    let msg: String = db
        .query_one("SELECT msg_id FROM inbound_events WHERE id = $1", &[&expunged["eventId"].as_str().unwrap()])
        .await
        .unwrap()
        .get(0);
    let res = t.req(Method::DELETE, &format!("/api/v1/app/{kept}/msg/{msg}/content")).send().await.unwrap();
    assert_eq!(res.status(), 204);

    // A source keeping 90 days holds the partitions back while the rows move in.
    let holder = t
        .post(
            "/api/v1/source",
            json!({"name": "h", "provider": "stripe", "secret": SECRET, "appId": kept, "retention": 90}),
            201,
        )
        .await;
    // Every event moves to the partition of a day 40 days back, past the window.
    let day = day_of(Utc::now()) - Days::days(40);
    let inbound = partitions::family("inbound_events").unwrap();
    partitions::create(&db, inbound, day, day + Days::days(1)).await.unwrap();
    let partition = format!("inbound_events_p{}", day.format("%Y%m%d"));
    let mut before = BTreeMap::new();
    let ids: Vec<String> = received
        .iter()
        .chain(
            [expunged["eventId"].as_str().unwrap().to_owned(), erased_event["eventId"].as_str().unwrap().to_owned()]
                .iter(),
        )
        .cloned()
        .collect();
    for (n, id) in ids.iter().enumerate() {
        let old = InboundEventId::generated_at(day + Days::minutes(n as i64 + 1));
        db.execute(
            "UPDATE inbound_events SET id = $2, received_at = $3 WHERE id = $1",
            &[id, &old.as_str(), &(day + Days::minutes(1))],
        )
        .await
        .unwrap();
        db.execute(
            "UPDATE inbound_keys SET event_id = $2, received_at = $3 WHERE event_id = $1",
            &[id, &old.as_str(), &(day + Days::minutes(1))],
        )
        .await
        .unwrap();
        let row = db
            .query_one(
                "SELECT source_id, status, convert_from(payload, 'UTF8') FROM inbound_events WHERE id = $1",
                &[&old.as_str()],
            )
            .await
            .unwrap();
        before.insert(
            old.to_string(),
            (row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, Option<String>>(2)),
        );
    }
    let erased_old = before.keys().last().unwrap().clone();
    // The customer's erasure, requested (the pruners carry it out meanwhile).
    let tenant = hookgate_shared::TenantId::parse(&t.id).unwrap();
    let erased_app = hookgate_shared::ids::AppId::parse(&erased).unwrap();
    hookgate_shared::store::erasure::request_erasure(
        &db,
        &tenant,
        &erased_app,
        &hookgate_shared::cache::Caches::default(),
    )
    .await
    .unwrap();
    let res = t
        .req(Method::PATCH, &format!("/api/v1/source/{}", holder["id"].as_str().unwrap()))
        .json(&json!({"retention": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the horizon comes back to 30 days: the partition may go");

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let gone: bool = db.query_one("SELECT to_regclass($1) IS NULL", &[&partition]).await.unwrap().get(0);
        if gone {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{partition} was not dropped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let list = cli(&["archive", "list", "--archive", &url]).await;
    let line =
        list.lines().find(|l| l.contains(&partition)).unwrap_or_else(|| panic!("{partition} not listed: {list}"));
    assert!(line.starts_with("inbound_events\t"), "{line}");
    assert!(line.contains("\t6 rows\t"), "six rows: the erased customer's is not archived: {line}");
    let shown = cli(&["archive", "show", "--archive", &url, "--partition", &partition]).await;
    let rows: Vec<Value> = shown.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 6);
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let (source_id, status, payload) = &before[id];
        assert_eq!(row["source_id"].as_str(), Some(source_id.as_str()), "{row}");
        assert_eq!(row["status"].as_str(), Some(status.as_str()), "what we answered: {row}");
        assert_eq!(row["payloadText"].as_str(), payload.as_deref(), "{row}");
    }
    assert!(rows.iter().all(|r| r["id"] != erased_old.as_str()), "no row of the erased customer");
    assert!(!shown.contains(&marker), "neither the expunged nor the erased content");
    // By id alone: the archive of the day the id was made in is read.
    let sample = rows[2]["id"].as_str().unwrap();
    let found = cli(&["archive", "show", "--archive", &url, "--id", sample]).await;
    assert_eq!(found.lines().count(), 1, "{found}");
    assert!(found.contains(r#""status":"accepted""#), "{found}");
    // The compressed object holds no byte of the marker either.
    let object = std::fs::read(dir.join("inbound_events").join(format!("{partition}.jsonl.zst"))).unwrap();
    let text = zstd_text(&object);
    assert!(!text.contains(&marker));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Decompresses with the `zstd` command, an implementation apart from Hookgate's.
fn zstd_text(object: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("zstd")
        .args(["-d", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the zstd command is installed");
    child.stdin.take().unwrap().write_all(object).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}
