//! `Idempotency-Key` on Hookgate's own POSTs.

use hookgate_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

fn create(app: &TestApp, key: &str, body: Value) -> reqwest::RequestBuilder {
    app.admin(Method::POST, "/admin/v1/tenant").header("Idempotency-Key", key).json(&body)
}

#[tokio::test]
async fn the_same_key_and_body_replays_the_first_response() {
    let app = TestApp::spawn().await;
    let first = create(&app, "k1", json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();

    let again = create(&app, "k1", json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert!(again.headers().contains_key("x-request-id"));
    let again: Value = again.json().await.unwrap();
    assert_eq!(again, first, "the very same tenant and key, not a second one");

    let listed: Value = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_same_key_with_a_different_body_replays_the_first_answer() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let make = |name: &str| {
        t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "k2").json(&json!({"name": name})).send()
    };
    let first = make("Acme").await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let res = make("Other").await.unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let again: Value = res.json().await.unwrap();
    assert_eq!(again, first, "the first application again, and no second one made");
    assert_eq!(t.get("/api/v1/app").await["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_credential_is_never_replayed_to_another_body() {
    let app = TestApp::spawn().await;
    // A tenant and its API key.
    assert_eq!(create(&app, "k2c", json!({"name": "Acme"})).send().await.unwrap().status(), 201);
    let res = create(&app, "k2c", json!({"name": "Other"})).send().await.unwrap();
    assert_eq!(res.status(), 422, "not the first tenant's API key");
    // A read-write portal token is not the answer to a request for a read-only one.
    let t = app.tenant().await;
    let a = t.application().await;
    let portal = |body: Value| {
        t.req(Method::POST, &format!("/api/v1/auth/app-portal-access/{a}"))
            .header("Idempotency-Key", "k2p")
            .json(&body)
            .send()
    };
    assert_eq!(portal(json!({"readOnly": false})).await.unwrap().status(), 200);
    let res = portal(json!({"readOnly": true})).await.unwrap();
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "idempotency_key_reused");
    assert_eq!(portal(json!({"readOnly": false})).await.unwrap().headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn a_refusal_is_not_kept_so_a_corrected_retry_runs() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let make = |body: Value| t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "k2r").json(&body).send();
    assert_eq!(make(json!({"name": ""})).await.unwrap().status(), 422);
    let fixed = make(json!({"name": "Fixed"})).await.unwrap();
    assert_eq!(fixed.status(), 201, "the corrected body runs, not the first 422 replayed");
    assert!(fixed.headers().get("idempotent-replayed").is_none());
}

#[tokio::test]
async fn a_key_stored_by_the_previous_release_is_still_the_same_request() {
    use sha2::{Digest, Sha256};
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let body = json!({"name": "Before the upgrade"});
    let first = t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "k2u").json(&body).send().await.unwrap();
    assert_eq!(first.status(), 201);
    // The previous release bound a key to method, path and body: rewrite the row so.
    let mut h = Sha256::new();
    h.update(b"POST\0/api/v1/app\0");
    h.update(serde_json::to_vec(&body).unwrap());
    let legacy = h.finalize().to_vec();
    let db = app.db.client().await;
    let n = db.execute("UPDATE idempotency_keys SET fingerprint = $1 WHERE key = 'k2u'", &[&legacy]).await.unwrap();
    assert_eq!(n, 1);
    let again = t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "k2u").json(&body).send().await.unwrap();
    assert_eq!((again.status().as_u16(), again.headers()["idempotent-replayed"].to_str().unwrap()), (201, "true"));
}

#[tokio::test]
async fn the_same_key_on_another_path_answers_422() {
    let app = TestApp::spawn().await;
    assert_eq!(create(&app, "k2b", json!({"name": "Acme"})).send().await.unwrap().status(), 201);
    let res = app
        .admin(Method::POST, "/admin/v1/tenant?x=1")
        .header("Idempotency-Key", "k2b")
        .json(&json!({"name": "Acme"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "idempotency_key_reused");
}

#[tokio::test]
async fn the_same_key_while_the_first_request_runs_answers_409() {
    let app = TestApp::spawn().await;
    // Hold a lock that the tenant insert needs, so the first request stays running
    // after it has claimed its key.
    let mut db = app.db.client().await;
    let tx = db.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE tenants IN EXCLUSIVE MODE").await.unwrap();

    let first = tokio::spawn(create(&app, "k3", json!({"name": "Slow"})).send());
    // Wait until the first request has claimed its key (it then blocks on the lock).
    let probe = app.db.client().await;
    for _ in 0..250 {
        let n: i64 =
            probe.query_one("SELECT count(*) FROM idempotency_keys WHERE key = 'k3'", &[]).await.unwrap().get(0);
        if n == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let second =
        tokio::time::timeout(std::time::Duration::from_secs(10), create(&app, "k3", json!({"name": "Slow"})).send())
            .await
            .expect("the second request is answered at once, not queued behind the first")
            .unwrap();
    assert_eq!(second.status(), 409);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["code"], "idempotency_in_flight");

    tx.rollback().await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), 201);
    let third = create(&app, "k3", json!({"name": "Slow"})).send().await.unwrap();
    assert_eq!(third.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn keys_are_scoped_to_the_caller() {
    let app = TestApp::spawn().await;
    let a = app.create_tenant("A").await;
    let b = app.create_tenant("B").await;
    let post = |key: &str| {
        app.api(key, Method::POST, "/api/v1/app").header("Idempotency-Key", "shared").json(&json!({"name": "x"}))
    };
    let ra: Value = post(a["apiKey"].as_str().unwrap()).send().await.unwrap().json().await.unwrap();
    let rb = post(b["apiKey"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(rb.status(), 201);
    assert!(rb.headers().get("idempotent-replayed").is_none(), "B's request is not A's replay");
    let rb: Value = rb.json().await.unwrap();
    assert_ne!(ra["id"], rb["id"]);
}

#[tokio::test]
async fn an_over_long_key_is_refused_and_nothing_is_created() {
    let app = TestApp::spawn().await;
    let res = create(&app, &"k".repeat(256), json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("255"), "{body}");
    let listed: Value = app.admin(Method::GET, "/admin/v1/tenant").send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn an_expired_key_runs_the_request_again() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_IDEMPOTENCY_TTL_SECS".into(), "1".into());
    })
    .await;
    let first: Value = create(&app, "k4", json!({"name": "Acme"})).send().await.unwrap().json().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = create(&app, "k4", json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(second.status(), 201);
    assert!(second.headers().get("idempotent-replayed").is_none());
    let second: Value = second.json().await.unwrap();
    assert_ne!(first["id"], second["id"]);
}

#[tokio::test]
async fn a_message_request_whose_outcome_was_lost_does_not_create_a_second_message() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let send = || {
        t.req(Method::POST, &format!("/api/v1/app/{a}/msg"))
            .header("Idempotency-Key", "order-42")
            .json(&json!({"eventType": "order.paid", "payload": {"n": 42}}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    // The process died after the message's commit, before the key's response was
    // stored: the key is left `running`, and a minute later it is taken over.
    let db = app.db.client().await;
    let n = db
        .execute(
            "UPDATE idempotency_keys SET state = 'running', status = NULL, headers = NULL, body = NULL,
                created_at = now() - interval '2 minutes'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let retry = send().await.unwrap();
    assert_eq!(retry.status(), 202);
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry["id"], first["id"], "the retry finds the message its first run created");
    let listed = t.get(&format!("/api/v1/app/{a}/msg")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn an_abandoned_key_reused_with_another_body_finds_the_first_message_and_makes_no_second() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let send = |n: i64| {
        t.req(Method::POST, &format!("/api/v1/app/{a}/msg"))
            .header("Idempotency-Key", "order-43")
            .json(&json!({"eventType": "order.paid", "payload": {"n": n}}))
            .send()
    };
    let first = send(1).await.unwrap();
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    // Its outcome was lost (left `running`), and a minute has passed.
    let db = app.db.client().await;
    db.execute(
        "UPDATE idempotency_keys SET state = 'running', status = NULL, headers = NULL, body = NULL,
            created_at = now() - interval '2 minutes'",
        &[],
    )
    .await
    .unwrap();
    // The key is bound to the path, not the body (as Svix's): the retry takes the key
    // over and finds the message its first run made.
    let other = send(2).await.unwrap();
    assert_eq!(other.status(), 202);
    let other: Value = other.json().await.unwrap();
    assert_eq!(other["id"], first["id"], "the first message, not a second one");
    let listed = t.get(&format!("/api/v1/app/{a}/msg")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn an_expired_key_creates_a_new_message() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_IDEMPOTENCY_TTL_SECS".into(), "1".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    let send = || {
        t.req(Method::POST, &format!("/api/v1/app/{a}/msg"))
            .header("Idempotency-Key", "daily")
            .json(&json!({"eventType": "report.ready", "payload": {}}))
            .send()
    };
    let first: Value = send().await.unwrap().json().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = send().await.unwrap();
    assert_eq!(second.status(), 202);
    let second: Value = second.json().await.unwrap();
    assert_ne!(first["id"], second["id"], "past its lifetime the key is a new request");
}

#[tokio::test]
async fn a_request_killed_before_its_commit_leaves_nothing_and_its_retry_runs_once() {
    use hookgate_tests::process::Served;
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let db = app.db.client().await;
    // Storing the response sleeps, then fails: the process is killed after the
    // application's insert ran and while its key's response is being stored, and
    // that storing never lands. Before the response was stored in the handler's
    // transaction, the application had committed by then and the retry, taking the
    // key over, created a second one.
    db.batch_execute(
        "CREATE FUNCTION slow_finish() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.state = 'done' THEN PERFORM pg_sleep(4); RAISE EXCEPTION 'the process died'; END IF;
         RETURN NEW; END $$;
         CREATE TRIGGER slow_finish BEFORE UPDATE ON idempotency_keys
         FOR EACH ROW EXECUTE FUNCTION slow_finish();",
    )
    .await
    .unwrap();
    let mut doomed = Served::start(&app.env, "api").await;
    let body = json!({"name": "Once"});
    let request = app
        .http
        .post(doomed.url("/api/v1/app"))
        .bearer_auth(&t.key)
        .header("Idempotency-Key", "app-once")
        .json(&body)
        .send();
    let sent = tokio::spawn(request);
    let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'UPDATE idempotency_keys%'
                    AND state = 'active' AND pid <> pg_backend_pid()";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.query_one(sleeping, &[]).await.unwrap().get::<_, i64>(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "the request reaches the storing of its response");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    doomed.kill().await;
    assert!(sent.await.unwrap().is_err(), "the killed process answered nothing");
    db.batch_execute("DROP TRIGGER slow_finish ON idempotency_keys").await.unwrap();
    // A minute later the abandoned key is taken over (waits for the dead
    // transaction's row lock, then ages the key).
    db.execute("UPDATE idempotency_keys SET created_at = now() - interval '2 minutes'", &[]).await.unwrap();
    let retry = t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "app-once").json(&body).send().await;
    let retry = retry.unwrap();
    assert_eq!(retry.status(), 201);
    let created: Value = retry.json().await.unwrap();
    let again = t.req(Method::POST, "/api/v1/app").header("Idempotency-Key", "app-once").json(&body).send().await;
    let again = again.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap()["id"], created["id"]);
    let listed = t.get("/api/v1/app").await;
    let names: Vec<_> = listed["data"].as_array().unwrap().iter().map(|a| a["name"].clone()).collect();
    assert_eq!(names, vec![json!("Once")], "exactly one application: {listed}");
}

#[tokio::test]
async fn a_stale_holder_whose_key_was_taken_over_leaves_no_effect() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let db = app.db.client().await;
    // The key is taken over while the first request runs (it outlived the takeover
    // delay): its response cannot be stored, so its effect rolls back.
    // As a successor's claim does: the token this request holds is not the row's.
    db.batch_execute(
        "CREATE FUNCTION moved() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN NEW.claim_token := NEW.claim_token + 1; RETURN NEW; END $$;
         CREATE TRIGGER moved BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION moved();",
    )
    .await
    .unwrap();
    let res = t
        .req(Method::POST, "/api/v1/app")
        .header("Idempotency-Key", "taken")
        .json(&json!({"name": "Stale"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 409, "the stale holder is told it no longer holds the key");
    let listed = t.get("/api/v1/app").await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 0, "its application rolled back: {listed}");
}

#[tokio::test]
async fn a_kept_response_that_cannot_be_opened_is_not_replayed_as_ciphertext() {
    let app = TestApp::spawn().await;
    assert_eq!(create(&app, "k9", json!({"name": "Acme"})).send().await.unwrap().status(), 201);
    let db = app.db.client().await;
    // Kept in clear by a release before replies were sealed: replayed as stored.
    db.execute("UPDATE idempotency_keys SET body = '{\"legacy\":true}'::bytea", &[]).await.unwrap();
    let res = create(&app, "k9", json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"legacy": true}));
    // Sealed under another master key: ciphertext is not an answer.
    db.execute("UPDATE idempotency_keys SET body = '\\x00ff13a7c4d2'::bytea", &[]).await.unwrap();
    let res = create(&app, "k9", json!({"name": "Acme"})).send().await.unwrap();
    assert_eq!(res.status(), 500);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "idempotency_replay_unreadable", "{body}");
    assert!(body["detail"].as_str().unwrap().contains("HOOKGATE_MASTER_KEY"), "{body}");
}

#[tokio::test]
async fn an_operational_endpoint_rotation_whose_answer_was_not_stored_is_undone_and_its_retry_rotates_once() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let db = app.db.client().await;
    let sink = hookgate_tests::sink::Sink::start().await;
    let ep = t.post("/api/v1/operational-webhook/endpoint", json!({"url": sink.url}), 201).await;
    let ep = ep["id"].as_str().unwrap().to_owned();
    let secret_of = |id: String| {
        let db = &db;
        async move {
            let row = db.query_one("SELECT secret FROM endpoints WHERE id = $1", &[&id]).await.unwrap();
            row.get::<_, Vec<u8>>(0)
        }
    };
    let original = secret_of(ep.clone()).await;
    // Storing the answer fails, as if the process died there: the rotation must
    // not have happened (it used to commit on its own, before the answer).
    db.batch_execute(
        "CREATE FUNCTION failed_finish() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.state = 'done' THEN RAISE EXCEPTION 'the process died'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER failed_finish BEFORE UPDATE ON idempotency_keys
         FOR EACH ROW EXECUTE FUNCTION failed_finish();",
    )
    .await
    .unwrap();
    let path = format!("/api/v1/operational-webhook/endpoint/{ep}/secret/rotate");
    let first = t.req(Method::POST, &path).header("Idempotency-Key", "rotate-once").json(&json!({})).send().await;
    assert!(!first.unwrap().status().is_success());
    assert_eq!(secret_of(ep.clone()).await, original, "nothing rotated without its stored answer");
    db.batch_execute("DROP TRIGGER failed_finish ON idempotency_keys").await.unwrap();
    db.execute("UPDATE idempotency_keys SET created_at = now() - interval '2 minutes'", &[]).await.unwrap();
    let retry = t.req(Method::POST, &path).header("Idempotency-Key", "rotate-once").json(&json!({})).send().await;
    assert_eq!(retry.unwrap().status(), 204);
    let again = t.req(Method::POST, &path).header("Idempotency-Key", "rotate-once").json(&json!({})).send().await;
    let again = again.unwrap();
    assert_eq!((again.status().as_u16(), again.headers()["idempotent-replayed"].to_str().unwrap()), (204, "true"));
    let row = db.query_one("SELECT old_secret FROM endpoints WHERE id = $1", &[&ep]).await.unwrap();
    assert_eq!(row.get::<_, Option<Vec<u8>>>(0), Some(original), "rotated once: the old secret is the first one");
}
