//! A real HTTP server on 127.0.0.1 that records what it receives and answers as told:
//! a status, a delay, or failing the first N tries of each `webhook-id`.

use std::{
    collections::HashMap,
    net::TcpListener,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

/// How the sink answers.
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub status: u16,
    pub delay: Duration,
    /// Answer 500 to the first N requests of each `webhook-id` (or of all, if absent).
    pub fail_first: u32,
    pub headers: Vec<(String, String)>,
    /// The response body; `ok` when unset.
    pub body: Option<Vec<u8>>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour { status: 200, delay: Duration::ZERO, fail_first: 0, headers: Vec::new(), body: None }
    }
}

#[derive(Default)]
struct Inner {
    received: Vec<Received>,
    tries: HashMap<String, u32>,
    behaviour: Behaviour,
}

/// The sink; dropping it does not stop the server, which ends with the test.
#[derive(Clone)]
pub struct Sink {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl Sink {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind sink");
        let port = listener.local_addr().unwrap().port();
        let data = web::Data::from(inner.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(16 << 20))
                .default_service(web::to(record))
        })
        .workers(2)
        .listen(listener)
        .expect("sink listens")
        .disable_signals()
        .run();
        tokio::spawn(server);
        Sink { url: format!("http://127.0.0.1:{port}"), inner }
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.inner.lock().unwrap().behaviour = behaviour;
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// Waits until at least `n` requests arrived, or panics after `timeout`.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "sink got {} of {n} requests in {timeout:?}", got.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn record(req: HttpRequest, body: web::Bytes, inner: web::Data<Mutex<Inner>>) -> HttpResponse {
    let headers: HashMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let behaviour = {
        let mut g = inner.lock().unwrap();
        let id = headers.get("webhook-id").cloned().unwrap_or_default();
        let tries = g.tries.entry(id).or_insert(0);
        *tries += 1;
        let failing = *tries <= g.behaviour.fail_first;
        g.received.push(Received {
            method: req.method().to_string(),
            path: req.uri().to_string(),
            headers,
            body: body.to_vec(),
            at: Instant::now(),
        });
        let mut b = g.behaviour.clone();
        if failing {
            b.status = 500;
        }
        b
    };
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    let mut res = HttpResponse::build(actix_web::http::StatusCode::from_u16(behaviour.status).unwrap());
    for (k, v) in &behaviour.headers {
        res.insert_header((k.as_str(), v.as_str()));
    }
    res.body(behaviour.body.unwrap_or_else(|| b"ok".to_vec()))
}
