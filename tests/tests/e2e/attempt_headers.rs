//! An attempt's request headers stored compactly only once the upgrade's
//! contract has run (the previous release reads only the full form); either
//! way the API shows what was sent.

use std::time::Duration;

use futures_util::TryStreamExt;
use hookgate_shared::migrate::{self, Contracts, Switch, MIGRATIONS};
use hookgate_tests::{app::default_env, Sink, TestApp, TestDb};
use serde_json::{json, Value};

/// The stored headers of message `msg`'s attempt, as text.
async fn stored(app: &TestApp, msg: &str) -> String {
    let db = app.db.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = db.query_opt("SELECT request_headers::text FROM attempts WHERE msg_id = $1", &[&msg]).await.unwrap();
        if let Some(row) = row {
            return row.get(0);
        }
        assert!(std::time::Instant::now() < deadline, "no attempt of {msg}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_attempts_headers_are_stored_compactly_only_after_the_contract_and_shown_as_sent_either_way() {
    let db = TestDb::empty().await;
    hookgate_tests::db::migrate_holding_contracts_from(&mut db.client().await, "0048").await;
    let mut env = default_env(&db);
    // The workers would apply the contract by themselves once the grace is over.
    env.insert("HOOKGATE_CONTRACT_GRACE_SECS".into(), "3600".into());
    let app = TestApp::spawn_on(db.clone(), env).await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    t.endpoint(&a, &sink.url, json!({"headers": {"X-Token": "secret-value"}})).await;
    let shown = async |msg: &str| -> Value {
        let list = t.get(&format!("/api/v1/app/{a}/attempt/msg/{msg}")).await;
        let attempt = list["data"][0]["id"].as_str().expect("an attempt").to_owned();
        t.get(&format!("/api/v1/app/{a}/msg/{msg}/attempt/{attempt}/headers")).await["sentHeaders"].clone()
    };

    let before = t.message(&a, "x", json!({"n": 1})).await["id"].as_str().unwrap().to_owned();
    let before_stored = stored(&app, &before).await;
    assert!(before_stored.contains(&before) && !before_stored.contains("\":n\""), "full form: {before_stored}");

    // As the workers would: a contract whose lock wait ran out is tried again.
    let mut tries = 0;
    while let Err(e) =
        migrate::run_list(&mut db.client().await, MIGRATIONS, None, Switch::Apply, Contracts::Apply).await
    {
        tries += 1;
        assert!(tries < 10, "the contracts never ran: {e}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = t.message(&a, "x", json!({"n": 2})).await["id"].as_str().unwrap().to_owned();
    let after_stored = stored(&app, &after).await;
    assert!(!after_stored.contains(&after) && after_stored.contains("\":n\""), "compact form: {after_stored}");
    assert!(after_stored.len() * 2 < before_stored.len(), "{after_stored} against {before_stored}");

    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    for msg in [&before, &after] {
        let sent = got.iter().find(|r| r.header("webhook-id") == Some(msg.as_str())).expect("delivered");
        let headers = shown(msg).await;
        for name in [
            "webhook-id",
            "svix-id",
            "webhook-timestamp",
            "svix-timestamp",
            "webhook-signature",
            "svix-signature",
            "content-type",
        ] {
            assert_eq!(headers[name].as_str(), sent.header(name), "{msg}: {name} in {headers}");
        }
        assert_eq!(headers["x-token"], "[redacted]", "{msg}: {headers}");
        assert!(!stored(&app, msg).await.contains("secret-value"), "a custom value is never kept");
    }

    // The cold archive is read without a database: it keeps the full form.
    let client = app.db.client().await;
    let partition: String = client
        .query_one("SELECT tableoid::regclass::text FROM attempts WHERE msg_id = $1", &[&after])
        .await
        .unwrap()
        .get(0);
    let rows: Vec<String> = hookgate_shared::store::partition_export::rows(&client, "attempts", &partition)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let archived =
        rows.iter().map(|r| serde_json::from_str::<Value>(r).unwrap()).find(|r| r["msg_id"] == after.as_str());
    let headers = &archived.expect("the attempt is archived")["request_headers"];
    assert_eq!(headers["webhook-id"], after.as_str(), "{headers}");
    assert_eq!(headers["svix-id"], after.as_str(), "{headers}");
    assert!(headers.get(":n").is_none(), "{headers}");
}
