//! The test bed every scenario shares: the stack's URLs, the sink, the running
//! Hookgate processes, the CPU and WAL meter, and tenants made through the admin API.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use serde_json::{json, Value};

use crate::{
    cpu::{Meter, Sample},
    report::Row,
    sink::Sink,
    stack::{self, Hookgate, Stack, ADMIN_TOKEN},
};

pub struct Bed {
    pub database_url: String,
    pub env: HashMap<String, String>,
    pub http: reqwest::Client,
    pub sink: Sink,
    pub meter: Meter,
    pub api: Hookgate,
    pub ingress: Hookgate,
}

/// A tenant's API key, and where its API answers.
pub struct Tenant {
    pub http: reqwest::Client,
    pub api: String,
    pub key: String,
}

impl Tenant {
    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let res = self.http.post(format!("{}{path}", self.api)).bearer_auth(&self.key).json(&body).send().await?;
        anyhow::ensure!(res.status().is_success(), "POST {path}: {}", res.status());
        Ok(res.json().await?)
    }

    /// A new application with one endpoint at `url` (`throttleRate` if given); its id.
    pub async fn app_to(&self, name: &str, url: &str, throttle: Option<i32>) -> anyhow::Result<String> {
        let app = self.post("/api/v1/app", json!({"name": name})).await?["id"].as_str().unwrap_or_default().to_owned();
        let mut ep = json!({"url": url});
        if let Some(rate) = throttle {
            ep["throttleRate"] = json!(rate);
        }
        self.post(&format!("/api/v1/app/{app}/endpoint"), ep).await?;
        Ok(app)
    }
}

impl Bed {
    pub async fn up(stack: &Stack, env: HashMap<String, String>, sink: Sink) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().pool_max_idle_per_host(1024).build()?;
        let redis_port = stack.redis_url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok());
        let meter = Meter::find(&stack.database_url, redis_port.unwrap_or(0)).await?;
        let api = stack::start("api", &env).await;
        let ingress = stack::start("ingress", &env).await;
        Ok(Bed { database_url: stack.database_url.clone(), env, http, sink, meter, api, ingress })
    }

    /// A new tenant, through the admin API.
    pub async fn tenant(&self, name: &str) -> anyhow::Result<Arc<Tenant>> {
        let admin: Value = self
            .http
            .post(self.api.url("/admin/v1/tenant"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": name}))
            .send()
            .await?
            .json()
            .await?;
        let key = admin["apiKey"].as_str().ok_or_else(|| anyhow::anyhow!("no apiKey: {admin}"))?.to_owned();
        Ok(Arc::new(Tenant { http: self.http.clone(), api: self.api.url(""), key }))
    }

    pub fn psql(&self, sql: &str) -> anyhow::Result<()> {
        let ok = std::process::Command::new("psql").args([self.database_url.as_str(), "-qc", sql]).status()?;
        anyhow::ensure!(ok.success(), "psql failed: {sql}");
        Ok(())
    }

    /// An empty outbox for the next scenario.
    pub fn truncate(&self) -> anyhow::Result<()> {
        self.psql("TRUNCATE messages, deliveries, attempts, message_event_ids")
    }

    /// The CPU used so far by the API, ingress and `worker` (if running), Postgres and Redis.
    pub async fn cpu(&self, worker: Option<&Hookgate>) -> Sample {
        let mut procs = vec![&self.api, &self.ingress];
        procs.extend(worker);
        self.meter.sample(&procs).await
    }

    pub async fn start_worker(&self) -> Hookgate {
        stack::start("worker", &self.env).await
    }

    /// Waits until the sink has received `target` requests in all.
    pub async fn wait_for(&self, target: u64, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        while self.sink.count() < target {
            anyhow::ensure!(started.elapsed() < timeout, "sink got {} of {target}", self.sink.count());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(started.elapsed())
    }

    /// Starts a worker on the outbox as it stands, times it delivering `n`, and adds
    /// the row; the rate delivered per second.
    pub(crate) async fn drain(&self, n: usize, name: &str, h: f64, rows: &mut Vec<Row>) -> anyhow::Result<f64> {
        let before_count = self.sink.count();
        let before: Sample = self.cpu(None).await;
        let mut worker = self.start_worker().await;
        let took = self.wait_for(before_count + n as u64, Duration::from_secs(600)).await?;
        let cpu = before.per(&self.cpu(Some(&worker)).await, n as u64);
        worker.stop().await;
        let rate = n as f64 / took.as_secs_f64();
        rows.push(Row {
            name: name.into(),
            concurrency: 128,
            rate,
            ratio: Some((rate / h, "H".into())),
            bar: Some((">= 0.5 x".into(), rate / h >= 0.5)),
            cpu: Some(cpu),
            note: "delivered/s, worker concurrency 128".into(),
            ..Row::default()
        });
        Ok(rate)
    }
}

/// Publishes `n` messages to `app` as fast as `clients` allow.
pub async fn publish(t: &Arc<Tenant>, app: &str, n: usize, clients: usize) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (t, next, app) = (t.clone(), next.clone(), app.to_owned());
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                // A message refused is sent again: the scenario waits for all `n` delivered.
                let mut tries = 0;
                while let Err(e) =
                    t.post(&format!("/api/v1/app/{app}/msg"), json!({"eventType": "bench", "payload": {"k": 1}})).await
                {
                    tries += 1;
                    eprintln!("publishing a message failed (try {tries}): {e}");
                    anyhow::ensure!(tries < 5, "a message was refused {tries} times: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}
