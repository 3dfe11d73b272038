//! The delivery sink: a real HTTP server on 127.0.0.1 that answers 200 at once
//! (or after a second, under `/slow`; or 500, under `/fail`, counted apart),
//! counts what it receives, and records the lag of payloads stamped with `t`.

use std::{
    net::TcpListener,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use actix_web::{web, App, HttpResponse, HttpServer};
use hdrhistogram::Histogram;

/// How long the `/slow` endpoints take to answer.
pub const SLOW: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct Sink {
    pub url: String,
    pub received: Arc<AtomicU64>,
    /// Requests under `/fail`, answered 500 and not counted in `received`.
    pub failed: Arc<AtomicU64>,
    /// Of those, the payloads stamped with `t` (whose lag is recorded).
    pub stamped: Arc<AtomicU64>,
    pub lag: Arc<Mutex<Histogram<u64>>>,
    /// When each stamped payload that arrived more than 100 ms after it was sent
    /// was sent (microseconds since the epoch), and its lag: where a step's p99 went.
    pub late: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// Microseconds since the epoch: payloads carry it as `t` when lag is measured.
pub fn now_micros() -> u64 {
    chrono::Utc::now().timestamp_micros() as u64
}

impl Sink {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let sink = Sink {
            url,
            received: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            stamped: Arc::new(AtomicU64::new(0)),
            lag: Arc::new(Mutex::new(crate::load::histogram())),
            late: Arc::default(),
        };
        let data = web::Data::new(sink.clone());
        let server = HttpServer::new(move || {
            App::new().app_data(data.clone()).default_service(web::to(
                |s: web::Data<Sink>, req: actix_web::HttpRequest, body: web::Bytes| async move {
                    if req.path().starts_with("/fail") {
                        s.failed.fetch_add(1, Ordering::Relaxed);
                        return HttpResponse::InternalServerError().finish();
                    }
                    if req.path().starts_with("/slow") {
                        tokio::time::sleep(SLOW).await;
                    }
                    s.received.fetch_add(1, Ordering::Relaxed);
                    if let Some(t) = stamp(&body) {
                        s.stamped.fetch_add(1, Ordering::Relaxed);
                        let lag = now_micros().saturating_sub(t).max(1);
                        let _ = s.lag.lock().expect("lag lock").record(lag);
                        if lag > 100_000 {
                            s.late.lock().expect("late lock").push((t, lag));
                        }
                    }
                    HttpResponse::Ok().finish()
                },
            ))
        })
        .workers(2)
        .disable_signals()
        .listen(listener)?
        .run();
        tokio::spawn(server);
        Ok(sink)
    }

    pub fn count(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn stamped(&self) -> u64 {
        self.stamped.load(Ordering::Relaxed)
    }

    pub fn reset_lag(&self) {
        self.lag.lock().expect("lag lock").reset();
        self.late.lock().expect("late lock").clear();
    }
}

/// `"t":<micros>` at the start of a payload, without a JSON parse.
fn stamp(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = text.strip_prefix("{\"t\":")?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}
