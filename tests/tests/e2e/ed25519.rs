//! Ed25519 endpoint signing (Standard Webhooks' `v1a`, Svix's `whsk_` keys): what a
//! receiver gets on a real 127.0.0.1 sink verifies with the `whpk_` public key the
//! API shows, checked here with ring's verifier alone, never with Hookgate's signer.

use std::time::Duration;

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use hookgate_tests::{
    app::Tenant,
    sink::{Received, Sink},
    TestApp,
};
use reqwest::Method;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde_json::{json, Value};
use sha2::Sha256;

const WAIT: Duration = Duration::from_secs(20);

/// A fresh key as Svix writes it, `whsk_<base64 of seed then public key>`, and its
/// public key as `whpk_<base64>`.
fn key_pair() -> (String, String) {
    let mut seed = [0u8; 32];
    SystemRandom::new().fill(&mut seed).unwrap();
    let public = Ed25519KeyPair::from_seed_unchecked(&seed).unwrap().public_key().as_ref().to_vec();
    (
        format!("whsk_{}", STANDARD.encode([seed.as_slice(), &public].concat())),
        format!("whpk_{}", STANDARD.encode(public)),
    )
}

/// The delivery's `id.timestamp.body`, as Standard Webhooks signs it.
fn signed_content(r: &Received, id_header: &str, ts_header: &str) -> Vec<u8> {
    let id = r.header(id_header).expect("an id header");
    let ts = r.header(ts_header).expect("a timestamp header");
    [id.as_bytes(), b".", ts.as_bytes(), b".", &r.body].concat()
}

/// Whether any `v1a,` entry of a signature header verifies with the `whpk_` key.
fn v1a_verifies(whpk: &str, header: &str, content: &[u8]) -> bool {
    let public = STANDARD.decode(whpk.strip_prefix("whpk_").expect("a whpk_ key")).unwrap();
    let key = UnparsedPublicKey::new(&ED25519, public);
    header
        .split(' ')
        .filter_map(|e| e.strip_prefix("v1a,"))
        .any(|sig| STANDARD.decode(sig).is_ok_and(|sig| key.verify(content, &sig).is_ok()))
}

/// The answer's status and what its body says (a 422's `detail` is Svix's list
/// of `{loc, msg, type}`).
async fn refused(t: &Tenant<'_>, path: &str, body: Value) -> (u16, String) {
    let res = t.req(Method::POST, path).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, body["detail"][0]["msg"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn an_endpoint_given_a_whsk_key_receives_v1a_signatures_that_verify_with_the_whpk_key_get_secret_shows() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let (whsk, whpk) = key_pair();
    let ep = t.endpoint(&a, &sink.url, json!({"secret": whsk})).await["id"].as_str().unwrap().to_owned();
    let shown = t.get(&format!("/api/v1/app/{a}/endpoint/{ep}/secret")).await["key"].as_str().unwrap().to_owned();
    assert_eq!(shown, whpk, "GET …/secret shows the public key, never the secret key");

    let msg = t.message(&a, "invoice.paid", json!({"amount": 1200})).await;
    let r = &sink.wait_for(1, WAIT).await[0];
    assert_eq!(r.header("webhook-id"), msg["id"].as_str());
    let sig = r.header("webhook-signature").unwrap();
    assert!(sig.starts_with("v1a,") && !sig.contains(' '), "one Ed25519 entry: {sig}");
    let content = signed_content(r, "webhook-id", "webhook-timestamp");
    assert!(v1a_verifies(&shown, sig, &content), "{sig} verifies with {shown}");
    let mut tampered = content.clone();
    tampered.push(b' ');
    assert!(!v1a_verifies(&shown, sig, &tampered), "a changed body does not verify");
    assert!(!v1a_verifies(&key_pair().1, sig, &content), "another key does not verify");
    // The svix- twins sign the same content the same way.
    assert_eq!(r.header("svix-signature"), Some(sig));
    assert!(v1a_verifies(&shown, r.header("svix-signature").unwrap(), &signed_content(r, "svix-id", "svix-timestamp")));

    // At rest the key is sealed: neither its text nor its bytes are in the row.
    let db = app.db.client().await;
    let row: String = db.query_one("SELECT t::text FROM endpoints t WHERE id = $1", &[&ep]).await.unwrap().get(0);
    let seed_hex = hex::encode(&STANDARD.decode(&whsk[5..]).unwrap()[..32]);
    for clear in [whsk[5..].to_owned(), hex::encode(whsk.as_bytes()), seed_hex] {
        assert!(!row.contains(&clear), "the endpoint's row holds its key in clear: {row}");
    }
}

#[tokio::test]
async fn a_malformed_whsk_key_is_refused_with_422_saying_what_is_wrong() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let (whsk, whpk) = key_pair();
    let (other, _) = key_pair();
    let raw = STANDARD.decode(&whsk[5..]).unwrap();
    let mixed =
        format!("whsk_{}", STANDARD.encode([&raw[..32], &STANDARD.decode(&other[5..]).unwrap()[32..]].concat()));
    let cases = [
        (format!("whsk_{}", STANDARD.encode(&raw[..32])), "not of 32 bytes"),
        (mixed, "must be the Ed25519 public key of its first 32"),
        ("whsk_not*base64".to_owned(), "standard base64"),
        (whpk, "public key, which verifies but cannot sign"),
    ];
    let created = format!("/api/v1/app/{a}/endpoint");
    for (bad, why) in &cases {
        let (status, detail) = refused(&t, &created, json!({"url": "http://127.0.0.1:9/", "secret": bad})).await;
        assert_eq!((status, detail.contains(why)), (422, true), "{bad}: {status} {detail}");
    }
    let ep = t.endpoint(&a, "http://127.0.0.1:9/", json!({})).await["id"].as_str().unwrap().to_owned();
    let rotate = format!("/api/v1/app/{a}/endpoint/{ep}/secret/rotate");
    for (bad, why) in &cases {
        let (status, detail) = refused(&t, &rotate, json!({ "key": bad })).await;
        assert_eq!((status, detail.contains(why)), (422, true), "rotate to {bad}: {status} {detail}");
    }
    let shown = t.get(&format!("/api/v1/app/{a}/endpoint/{ep}/secret")).await;
    assert!(shown["key"].as_str().unwrap().starts_with("whsec_"), "a refused rotation changes nothing: {shown}");
}

#[tokio::test]
async fn a_rotation_from_hmac_to_ed25519_signs_with_the_old_hmac_and_the_new_key_during_the_grace_period() {
    let app = TestApp::spawn().await;
    let sink = Sink::start().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let base = format!("/api/v1/app/{a}/endpoint/{ep}/secret");
    let old = t.get(&base).await["key"].as_str().unwrap().to_owned();
    assert!(old.starts_with("whsec_"), "{old}");
    let (whsk, whpk) = key_pair();
    let rotated = t.post(&format!("{base}/rotate"), json!({ "key": whsk }), 200).await;
    assert_eq!(rotated["key"], whpk.as_str(), "the rotation answers the public key");
    assert_eq!(t.get(&base).await["key"], whpk.as_str());

    t.message(&a, "x", json!({"k": "v"})).await;
    let r = &sink.wait_for(1, WAIT).await[0];
    let header = r.header("webhook-signature").unwrap();
    let entries: Vec<&str> = header.split(' ').collect();
    assert_eq!(entries.len(), 2, "the new key and the old secret: {header}");
    let content = signed_content(r, "webhook-id", "webhook-timestamp");
    assert!(v1a_verifies(&whpk, header, &content), "the new Ed25519 key signs: {header}");
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&STANDARD.decode(&old[6..]).unwrap()).unwrap();
    mac.update(&content);
    let v1 = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    assert!(entries.contains(&v1.as_str()), "the old whsec_ secret signs as before: {header}");
}

#[tokio::test]
async fn with_ed25519_the_default_new_endpoints_operational_webhooks_and_fifo_batches_all_sign_v1a() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_DEFAULT_SIGNATURE_TYPE".into(), "ed25519".into());
        env.insert("HOOKGATE_WORKER_POLL_MS".into(), "100".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;

    // An operational webhook endpoint, told of the endpoint made next.
    let ops = Sink::start().await;
    let op = t.post("/api/v1/operational-webhook/endpoint", json!({"url": ops.url}), 201).await;
    let op_key = t.get(&format!("/api/v1/operational-webhook/endpoint/{}/secret", op["id"].as_str().unwrap())).await;
    let op_key = op_key["key"].as_str().unwrap().to_owned();
    assert!(op_key.starts_with("whpk_"), "{op_key}");

    let sink = Sink::start().await;
    let ep = t.endpoint(&a, &sink.url, json!({})).await["id"].as_str().unwrap().to_owned();
    let ep_key = t.get(&format!("/api/v1/app/{a}/endpoint/{ep}/secret")).await["key"].as_str().unwrap().to_owned();
    assert!(ep_key.starts_with("whpk_") && ep_key != op_key, "{ep_key}");
    let told = ops.wait_for(1, WAIT).await;
    let notice = told.iter().find(|r| String::from_utf8_lossy(&r.body).contains("endpoint.created")).expect("told");
    let sig = notice.header("webhook-signature").unwrap();
    assert!(v1a_verifies(&op_key, sig, &signed_content(notice, "webhook-id", "webhook-timestamp")), "{sig}");

    // A FIFO endpoint's new key, with no grace for the one it was made with.
    let batches = Sink::start().await;
    let fifo = crate::sinks::fifo(&t, &a, json!({"url": batches.url}), json!({"batchSize": 1})).await;
    let rotate = format!("/api/v1/app/{a}/destination/{fifo}/secret/rotate");
    let fifo_key = t.post(&rotate, json!({"gracePeriodSeconds": 0}), 200).await["key"].as_str().unwrap().to_owned();
    assert!(fifo_key.starts_with("whpk_"), "{fifo_key}");

    t.message(&a, "x", json!({"n": 1})).await;
    let r = &sink.wait_for(1, WAIT).await[0];
    let sig = r.header("webhook-signature").unwrap();
    assert!(v1a_verifies(&ep_key, sig, &signed_content(r, "webhook-id", "webhook-timestamp")), "{sig}");
    let batch = &batches.wait_for(1, WAIT).await[0];
    let sig = batch.header("webhook-signature").unwrap();
    assert!(sig.starts_with("v1a,") && !sig.contains(' '), "{sig}");
    assert!(v1a_verifies(&fifo_key, sig, &signed_content(batch, "webhook-id", "webhook-timestamp")), "{sig}");
}
