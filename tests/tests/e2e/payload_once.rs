//! An admitted event's body stored once (in its message) only once the upgrade's
//! contract has run: before, a process of the previous release may read the
//! event's own copy, so it is kept; either way the API answers the same body.

use hookgate_shared::migrate::{self, Contracts, Switch, MIGRATIONS};
use hookgate_tests::{app::default_env, TestApp, TestDb};
use reqwest::Method;
use serde_json::{json, Value};

/// Whether the event `id` keeps a copy of its body in its own row.
async fn own_copy(app: &TestApp, id: &str) -> bool {
    app.count("SELECT count(*) FROM inbound_events WHERE id = $1 AND payload IS NOT NULL", id).await == 1
}

#[tokio::test]
async fn an_events_body_is_kept_in_its_own_row_until_the_contract_and_answered_the_same_after() {
    let db = TestDb::empty().await;
    hookgate_tests::db::migrate_holding_contracts_from(&mut db.client().await, "0045").await;
    let mut env = default_env(&db);
    // The workers would apply the contract by themselves once the grace is over.
    env.insert("HOOKGATE_CONTRACT_GRACE_SECS".into(), "3600".into());
    let app = TestApp::spawn_on(db.clone(), env).await;
    let t = app.tenant().await;
    let a = t.application().await;
    let source = t
        .post("/api/v1/source", json!({"name": "s", "provider": "stripe", "secret": "whsec_x", "appId": a}), 201)
        .await;
    let source = source["id"].as_str().unwrap().to_owned();
    let send = async |n: u32| -> (String, String) {
        let body = json!({"id": format!("evt_{n}"), "type": "invoice.paid", "data": {"n": n}}).to_string();
        let res = app.send_stripe(&source, "whsec_x", &body).await;
        assert!(res.status().is_success(), "{}", res.status());
        let got: Value = res.json().await.unwrap();
        (got["eventId"].as_str().unwrap().to_owned(), body)
    };
    let answered = async |id: &str| -> Value {
        let path = format!("/api/v1/source/{source}/event/{id}");
        app.api(&t.key, Method::GET, &path).send().await.unwrap().json::<Value>().await.unwrap()["payload"].clone()
    };

    let (before, before_body) = send(1).await;
    assert!(own_copy(&app, &before).await, "before the contract the event keeps its copy");

    // As the workers would: a contract whose lock wait ran out is tried again.
    let mut tries = 0;
    while let Err(e) =
        migrate::run_list(&mut db.client().await, MIGRATIONS, None, Switch::Apply, Contracts::Apply).await
    {
        tries += 1;
        assert!(tries < 10, "the contracts never ran: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let (after, after_body) = send(2).await;
    assert!(!own_copy(&app, &after).await, "after it, the body is only in the message");
    assert!(own_copy(&app, &before).await, "an event admitted before keeps its copy");
    for (id, body) in [(&before, &before_body), (&after, &after_body)] {
        assert_eq!(answered(id).await, serde_json::from_str::<Value>(body).unwrap(), "{id} answers its body");
    }
}
