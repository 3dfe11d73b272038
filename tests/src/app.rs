//! The app started in-process on port 0 against a fresh database.

use std::collections::HashMap;

use hookgate_gateway::{Application, Role};
use hookgate_shared::{crypto::MasterKey, Config};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::db::TestDb;

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// A running Hookgate with its own database.
pub struct TestApp {
    pub base: String,
    pub port: u16,
    /// Where `/metrics` is served: its own listener, not `port`.
    pub metrics_port: u16,
    pub db: TestDb,
    pub http: reqwest::Client,
    pub env: HashMap<String, String>,
}

/// The environment a test app gets unless the test changes it.
pub fn default_env(db: &TestDb) -> HashMap<String, String> {
    let mut env = HashMap::new();
    env.insert("DATABASE_URL".into(), db.url.clone());
    if let Ok(url) = std::env::var("HOOKGATE_TEST_REDIS_URL") {
        env.insert("REDIS_URL".into(), url);
    }
    env.insert("HOOKGATE_REDIS_PREFIX".into(), format!("{}:", db.name));
    env.insert("HOOKGATE_LISTEN".into(), "127.0.0.1:0".into());
    env.insert("HOOKGATE_METRICS_LISTEN".into(), "127.0.0.1:0".into());
    env.insert("HOOKGATE_ADMIN_TOKEN".into(), ADMIN_TOKEN.into());
    env.insert("HOOKGATE_MASTER_KEY".into(), MasterKey::generate_base64());
    env.insert("HOOKGATE_EGRESS_ALLOW_NETWORKS".into(), "127.0.0.1/32".into());
    // The sinks are on loopback, a private network: the tests read what they answered.
    env.insert("HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES".into(), "true".into());
    // PayPal certificates only from loopback: no test can make Hookgate reach PayPal.
    env.insert("HOOKGATE_PAYPAL_CERT_URLS".into(), "http://127.0.0.1:9/".into());
    env.insert("HOOKGATE_DB_TIMEOUT_MS".into(), "2000".into());
    env
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// Spawns with the default environment as changed by `edit`.
    pub async fn spawn_with(edit: impl FnOnce(&mut HashMap<String, String>)) -> Self {
        let db = TestDb::new().await;
        let mut env = default_env(&db);
        edit(&mut env);
        Self::spawn_on(db, env).await
    }

    /// Spawns on a Postgres server of the test's own (one it may stop or pause),
    /// migrated first, with the default environment as changed by `edit`.
    pub async fn spawn_on_server(
        pg: &crate::servers::PgServer,
        name: &str,
        edit: impl FnOnce(&mut HashMap<String, String>),
    ) -> Self {
        let db = TestDb::on(name, &pg.url());
        let mut env = default_env(&db);
        edit(&mut env);
        let migrate = [("DATABASE_URL", pg.url()), ("HOOKGATE_MASTER_KEY", env["HOOKGATE_MASTER_KEY"].clone())];
        let migrate: Vec<(&str, &str)> = migrate.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = crate::process::hookgate(&migrate).arg("migrate").output().await.expect("hookgate migrate runs");
        assert!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
        Self::spawn_on(db, env).await
    }

    pub async fn spawn_on(db: TestDb, env: HashMap<String, String>) -> Self {
        Self::spawn_role(db, env, Role::All).await
    }

    /// Spawns one role only, e.g. an API without workers, or a second worker.
    pub async fn spawn_role(db: TestDb, env: HashMap<String, String>, role: Role) -> Self {
        let config = Config::from_sources(None, &env).expect("test config is valid");
        let app = Application::build(config, role).expect("app builds");
        let port = app.port();
        let metrics_port = app.metrics_port().unwrap_or(0);
        tokio::spawn(app.run(role));
        TestApp { base: format!("http://127.0.0.1:{port}"), port, metrics_port, db, http: reqwest::Client::new(), env }
    }

    /// One role on a fresh database with the default environment.
    pub async fn spawn_role_default_env(role: Role) -> Self {
        let db = TestDb::new().await;
        let env = default_env(&db);
        Self::spawn_role(db, env, role).await
    }

    /// Another process-like instance (in this process) of a role on the same
    /// database and environment, e.g. a worker beside an API.
    pub async fn spawn_sibling(&self, role: Role) -> TestApp {
        let db = self.db.clone();
        Self::spawn_role(db, self.env.clone(), role).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `/metrics`, on the metrics listener.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.metrics_port)
    }

    /// A request with the operator's token.
    pub fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(ADMIN_TOKEN)
    }

    /// A request with a tenant API key.
    pub fn api(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(key)
    }

    /// The one number a query with one text parameter (`$1 = id`) answers, such as a `count(*)`.
    pub async fn count(&self, sql: &str, id: &str) -> i64 {
        self.db.client().await.query_one(sql, &[&id]).await.unwrap().get(0)
    }

    /// POSTs `body` to `/in/{source}` as Stripe signs it now.
    pub async fn send_stripe(&self, source: &str, secret: &str, body: &str) -> reqwest::Response {
        self.http
            .post(self.url(&format!("/in/{source}")))
            .header("content-type", "application/json")
            .header("stripe-signature", crate::providers::stripe(secret, crate::providers::now(), body.as_bytes()))
            .body(body.to_owned())
            .send()
            .await
            .unwrap()
    }

    /// The key this app stores an inbound event under (keyed with its master key),
    /// and the plain digest it is keyed from (what releases before keyed keys stored).
    pub fn inbound_key(
        &self,
        tenant: &str,
        source: &str,
        kind: hookgate_ingress::key::KeyKind,
        value: &[u8],
    ) -> (String, String) {
        let tenant = hookgate_shared::ids::TenantId::parse(tenant).expect("a tenant id");
        let source = hookgate_shared::ids::SourceId::parse(source).expect("a source id");
        let plain = hookgate_ingress::key::derive(&tenant, &source, kind, value);
        let master = MasterKey::from_base64(&self.env["HOOKGATE_MASTER_KEY"]).expect("the test master key");
        (master.inbound_keyer().keyed(&tenant, &plain), plain)
    }

    /// Creates a tenant through the admin API; returns its JSON (with `apiKey`).
    pub async fn create_tenant(&self, name: &str) -> Value {
        let res = self.admin(Method::POST, "/admin/v1/tenant").json(&json!({ "name": name })).send().await.unwrap();
        assert_eq!(res.status(), 201, "tenant creation failed");
        res.json().await.unwrap()
    }
}

/// A tenant of a test app, with helpers for the egress API.
pub struct Tenant<'a> {
    pub app: &'a TestApp,
    pub id: String,
    pub key: String,
}

impl TestApp {
    /// A new tenant with its key.
    pub async fn tenant(&self) -> Tenant<'_> {
        let t = self.create_tenant("Tenant").await;
        Tenant { app: self, id: t["id"].as_str().unwrap().into(), key: t["apiKey"].as_str().unwrap().into() }
    }
}

impl Tenant<'_> {
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.app.api(&self.key, method, path)
    }

    /// POSTs JSON and asserts the status; returns the body.
    pub async fn post(&self, path: &str, body: Value, status: u16) -> Value {
        let res = self.req(Method::POST, path).json(&body).send().await.unwrap();
        let got = res.status().as_u16();
        let text = res.text().await.unwrap();
        assert_eq!(got, status, "POST {path}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub async fn get(&self, path: &str) -> Value {
        let res = self.req(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), 200, "GET {path}");
        res.json().await.unwrap()
    }

    /// Creates an application; returns its id.
    pub async fn application(&self) -> String {
        let app = self.post("/api/v1/app", json!({"name": "App"}), 201).await;
        app["id"].as_str().unwrap().to_owned()
    }

    /// Creates an endpoint with `extra` fields merged in; returns its JSON.
    pub async fn endpoint(&self, app: &str, url: &str, extra: Value) -> Value {
        let mut body = json!({ "url": url });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.post(&format!("/api/v1/app/{app}/endpoint"), body, 201).await
    }

    /// A Stripe source of application `app` with `extra` fields merged in; returns its id.
    pub async fn stripe_source(&self, app: &str, secret: &str, extra: Value) -> String {
        let mut body = json!({"name": "stripe", "provider": "stripe", "secret": secret, "appId": app});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned()
    }

    /// Publishes a message; returns its JSON.
    pub async fn message(&self, app: &str, event_type: &str, payload: Value) -> Value {
        self.post(&format!("/api/v1/app/{app}/msg"), json!({"eventType": event_type, "payload": payload}), 202).await
    }
}
