//! Hostile input over HTTP: hundreds of random bodies, headers and path segments
//! against the provider door and the API. Every answer is a 2xx or a 4xx; none is
//! a 5xx, and the process stays up.

use hookgate_tests::{providers, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// A small deterministic generator (xorshift), so a failure replays exactly.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = (self.next() as usize) % max;
        (0..n).map(|_| self.next() as u8).collect()
    }

    fn text(&mut self, max: usize) -> String {
        const PIECES: &[&str] = &[
            "a", "{", "}", "\"", ":", ",", "\\u0000", "é", "🙂", "-", "_", ".", "/", "%00", " ", "1", "null", "[", "]",
        ];
        let n = (self.next() as usize) % max;
        (0..n).map(|_| PIECES[(self.next() as usize) % PIECES.len()]).collect()
    }
}

/// Each provider's header names, for the provider-door noise (`meta` and
/// `adobe-sign` are ingest sources only: their door is covered in test_ingest.py).
const PROVIDER_HEADERS: &[(&str, &[&str])] = &[
    ("twilio", &["x-twilio-signature", "i-twilio-idempotency-token"]),
    ("square", &["x-square-hmacsha256-signature"]),
    ("paddle", &["paddle-signature"]),
    (
        "paypal",
        &[
            "paypal-transmission-id",
            "paypal-transmission-time",
            "paypal-transmission-sig",
            "paypal-cert-url",
            "paypal-auth-algo",
        ],
    ),
    ("sendgrid", &["x-twilio-email-event-webhook-signature", "x-twilio-email-event-webhook-timestamp"]),
    ("discord", &["x-signature-ed25519", "x-signature-timestamp"]),
    ("mailgun", &[]),
    ("basic-auth", &["authorization"]),
    ("gitlab", &["x-gitlab-token", "idempotency-key", "x-gitlab-event-uuid"]),
    ("bitbucket", &["x-hub-signature", "x-request-uuid", "x-event-key"]),
    ("hubspot", &["x-hubspot-signature-v3", "x-hubspot-request-timestamp"]),
    ("intercom", &["x-hub-signature"]),
    ("zoom", &["x-zm-signature", "x-zm-request-timestamp"]),
    ("linear", &["linear-signature", "linear-delivery"]),
    ("typeform", &["typeform-signature"]),
    ("calendly", &["calendly-webhook-signature"]),
    ("woocommerce", &["x-wc-webhook-signature", "x-wc-webhook-delivery-id", "x-wc-webhook-topic"]),
    ("svix", &["svix-id", "svix-timestamp", "svix-signature"]),
    ("telnyx", &["telnyx-signature-ed25519", "telnyx-timestamp"]),
    ("orum", &["signature"]),
    ("checkbook", &["signature"]),
    ("tailscale", &["tailscale-webhook-signature"]),
    ("airwallex", &["x-signature", "x-timestamp"]),
    ("port", &["x-port-signature", "x-port-timestamp"]),
    ("merge", &["x-merge-webhook-signature"]),
    ("segment", &["x-signature"]),
    ("openclaw", &["authorization", "x-openclaw-token"]),
    ("vapi", &["x-vapi-secret"]),
    ("pandadoc", &[]),
    ("standard-webhooks", &["webhook-id", "webhook-timestamp", "webhook-signature"]),
];

#[tokio::test]
async fn random_requests_to_every_provider_never_get_a_5xx() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let mut noise = Noise(0xfeed_beef_0bad_cafe);
    let mut bad = Vec::new();
    for (provider, headers) in PROVIDER_HEADERS {
        let secret = match *provider {
            "discord" => "a".repeat(64),
            // SendGrid's example verification key (its libraries' tests).
            "sendgrid" => "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==".into(),
            "paypal" => "WH1".into(),
            "telnyx" => "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=".into(),
            "basic-auth" => "user:pass".into(),
            // An RSA public key (the one orum.rs's unit tests verify with).
            "orum" => "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEApQ3mkCpj1kJJ1cX9aEkJYiEjDS7RCEBmY74zh+Dqt3cckhKd3MxR37RnE5q+uzmMyx1XrbZ0liQlpF/NAr2A3u5yZ0LR3qjFIPcUU8gS8BPjs9fqsHqJT2Es03+C+iNVxHpDc1J98SbEsmhRR4INnU4Z+FPv+FKr8lRcF5sBOp8zIXEfQJ3xsBjI0zbDynt2VSmKPgddAJWQNeOPH8YXE+L8cEe+5bt2tbzdAz+0hn21nWI0igNBS8aUqI0ubATKQg4FKuL7LxNqcc72RpfMkBMdD6rxEbkVeqP5F+DsgTTzWoWxE5thk3V0HF2wcyHJiOBXUxGBpXWVydUceUEp2QIDAQAB".into(),
            "svix" | "standard-webhooks" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            _ => "a-shared-secret".into(),
        };
        let body = json!({"name": provider, "provider": provider, "secret": secret, "appId": a});
        let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
        for i in 0..40 {
            let raw = match i % 4 {
                0 => noise.bytes(400),
                1 => noise.text(200).into_bytes(),
                2 => br#"{"event":"endpoint.url_validation","payload":{"plainToken":"abc"},"type":1}"#.to_vec(),
                _ => b"webhook_id=1".to_vec(),
            };
            let mut req = app.http.post(app.url(&format!("/in/{src}?bodySHA256={}", noise.next()))).body(raw);
            for name in *headers {
                let value = match noise.next() % 3 {
                    0 => noise.text(90),
                    1 => format!("t={},v1={};h1={}", noise.next(), noise.text(40), noise.next()),
                    _ => format!("sha256={}", noise.text(64)),
                };
                if let Ok(v) = reqwest::header::HeaderValue::from_str(&value) {
                    req = req.header(*name, v);
                }
            }
            let status = req.send().await.unwrap().status().as_u16();
            if status >= 500 {
                bad.push(format!("{provider}: {status}"));
            }
        }
    }
    assert!(bad.is_empty(), "{} answers were 5xx: {:?}", bad.len(), &bad[..bad.len().min(10)]);
    assert_eq!(app.http.get(app.url("/healthz")).send().await.unwrap().status(), 200);
}

/// Ingest sources whose senders check the URL with a GET, and the ingest types
/// that read a query or a token: random requests to their doors, with and
/// without the token, by GET and POST.
#[tokio::test]
async fn random_requests_to_ingest_doors_never_get_a_5xx() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let configs = [
        json!({"name": "m", "type": "meta", "config": {"secret": "app-secret", "verifyToken": "vt"}}),
        json!({"name": "a", "type": "adobe-sign", "config": {"clientId": "CID"}}),
        json!({"name": "p", "type": "panda-doc", "config": {"secret": "pd"}}),
        json!({"name": "o", "type": "openclaw", "config": {"secret": "tok"}}),
        json!({"name": "g", "type": "generic-webhook"}),
    ];
    let mut doors = Vec::new();
    for body in configs {
        let res = t.req(Method::POST, "/ingest/api/v1/source").json(&body).send().await.unwrap();
        assert_eq!(res.status(), 201, "{body}");
        let made: Value = res.json().await.unwrap();
        doors.push(made["ingestUrl"].as_str().unwrap().to_owned());
    }
    let mut noise = Noise(0x0dd_ba11_cafe_beef);
    let (mut bad, mut sent) = (Vec::new(), 0);
    for (n, url) in doors.iter().enumerate() {
        let (base, _) = url.rsplit_once('/').unwrap();
        for i in 0..40 {
            let query = match i % 4 {
                0 => format!("hub.mode=subscribe&hub.verify_token={}&hub.challenge={}", noise.text(20), noise.text(30)),
                1 => format!("signature={}", noise.text(70)),
                2 => noise.text(60),
                _ => "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=%3Cscript%3E".into(),
            };
            let target = if i % 5 == 0 { format!("{base}/{}", noise.text(20)) } else { url.clone() };
            let full = format!("{target}?{}", query.replace(['#', ' '], ""));
            let mut req = if i % 2 == 0 { app.http.get(&full) } else { app.http.post(&full).body(noise.bytes(300)) };
            for name in ["x-adobesign-clientid", "authorization", "x-openclaw-token", "x-hub-signature-256"] {
                if let Ok(v) = reqwest::header::HeaderValue::from_str(&noise.text(40)) {
                    req = req.header(name, v);
                }
            }
            let Ok(res) = req.send().await else { continue };
            sent += 1;
            let status = res.status().as_u16();
            if status >= 500 {
                bad.push(format!("door {n}, request {i}: {status}"));
            }
        }
    }
    assert!(sent >= 150, "only {sent} of 200 requests could be sent");
    assert!(bad.is_empty(), "{} answers were 5xx: {:?}", bad.len(), &bad[..bad.len().min(10)]);
}

#[tokio::test]
async fn random_requests_never_get_a_5xx() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let a = t.application().await;
    let secret = "whsec_hostile_test_secret";
    let body = json!({"name": "s", "provider": "stripe", "secret": secret, "appId": a});
    let src = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let mut noise = Noise(0x5eed_cafe_f00d_d00d);
    let mut bad = Vec::new();
    for i in 0..300 {
        let raw = noise.bytes(600);
        let signature = match i % 3 {
            0 => providers::stripe(secret, providers::now(), &raw),
            1 => noise.text(80),
            _ => format!("t={},v1={}", noise.next(), noise.text(70)),
        };
        let req = app.http.post(app.url(&format!("/in/{src}"))).body(raw);
        let req = match reqwest::header::HeaderValue::from_str(&signature) {
            Ok(v) => req.header("stripe-signature", v),
            Err(_) => req,
        };
        let status = req.send().await.unwrap().status().as_u16();
        if status >= 500 {
            bad.push(format!("/in: {status}"));
        }
    }
    let paths =
        ["/api/v1/app", "/api/v1/app/{a}/msg", "/api/v1/app/{a}/endpoint", "/api/v1/source", "/api/v1/event-type"];
    for i in 0..300 {
        let path = paths[i % paths.len()].replace("{a}", &a);
        let body = noise.text(200);
        let res = t.req(Method::POST, &path).header("content-type", "application/json").body(body.clone()).send().await;
        let status = res.unwrap().status().as_u16();
        if status >= 500 {
            bad.push(format!("POST {path} {body:?}: {status}"));
        }
        let segment = noise.text(30);
        let res = t.req(Method::GET, &format!("/api/v1/app/{segment}/msg")).send().await;
        if let Ok(res) = res {
            if res.status().as_u16() >= 500 {
                bad.push(format!("GET app {segment:?}: {}", res.status()));
            }
        }
    }
    assert!(bad.is_empty(), "{} answers were 5xx: {:?}", bad.len(), &bad[..bad.len().min(10)]);
    assert_eq!(app.http.get(app.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_flood_of_unknown_source_ids_cannot_take_the_pool_from_a_real_tenant() {
    let app = TestApp::spawn_with(|env| {
        env.insert("HOOKGATE_DB_POOL_SIZE".into(), "4".into());
        env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "300".into());
    })
    .await;
    let t = app.tenant().await;
    let a = t.application().await;
    // Every lookup of a source is made slow (its table locked), and unknown
    // source ids flood in without end: each would hold a pooled connection while
    // it waits.
    let mut locker = app.db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE sources IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..32)
        .map(|_| {
            let (http, base, stop) = (app.http.clone(), app.url("/in/"), stop.clone());
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let url = format!("{base}{}", hookgate_shared::ids::SourceId::generate());
                    statuses.push(http.post(url).body("{}").send().await.unwrap().status().as_u16());
                }
                statuses
            })
        })
        .collect();
    // Past the second its key is cached for: the tenant's key is looked up again
    // (a key known live, so not in the unknown callers' queue), then its request.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let res = app.api(&t.key, Method::GET, &format!("/api/v1/app/{a}")).send().await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(res.status(), 200, "the real tenant is served while unknown callers wait their turn");
    lock.rollback().await.unwrap();
    for f in flood {
        for status in f.await.unwrap() {
            assert!([404, 503].contains(&status), "an unknown source is refused or told to retry: {status}");
        }
    }
}
