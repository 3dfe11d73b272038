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
    env.insert("HOOKGATE_ADMIN_TOKEN".into(), ADMIN_TOKEN.into());
    env.insert("HOOKGATE_MASTER_KEY".into(), MasterKey::generate_base64());
    env.insert(
        "HOOKGATE_EGRESS_ALLOW_NETWORKS".into(),
        "127.0.0.1/32".into(),
    );
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

    pub async fn spawn_on(db: TestDb, env: HashMap<String, String>) -> Self {
        let config = Config::from_sources(None, &env).expect("test config is valid");
        let app = Application::build(config, Role::All).expect("app builds");
        let port = app.port();
        tokio::spawn(app.run(Role::All));
        TestApp {
            base: format!("http://127.0.0.1:{port}"),
            port,
            db,
            http: reqwest::Client::new(),
            env,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request with the operator's token.
    pub fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(ADMIN_TOKEN)
    }

    /// A request with a tenant API key.
    pub fn api(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(key)
    }

    /// Creates a tenant through the admin API; returns its JSON (with `apiKey`).
    pub async fn create_tenant(&self, name: &str) -> Value {
        let res = self
            .admin(Method::POST, "/admin/v1/tenant")
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "tenant creation failed");
        res.json().await.unwrap()
    }
}
