//! The log of the requests a source refused (Svix's ingest log), so that whoever
//! set a source up can see why a provider's deliveries fail. Written off the
//! request's path and bounded: at most one refusal a second per source and
//! process, a few writes in flight (past them, refusals go unlogged), each
//! source trimmed to its newest 100. Refusals of Hookgate's own (5xx) are not the
//! sender's doing and are not logged.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use actix_web::http::header::HeaderMap;
use hookgate_shared::{
    db,
    store::{
        source_refusals::{self, Refused},
        sources::Source,
    },
    AppState,
};
use serde_json::{Map, Value};
use tokio::sync::Semaphore;

/// One refusal logged per source and process within this.
const APART: Duration = Duration::from_secs(1);
/// Writes in flight at once.
const MOST_WRITING: usize = 4;
/// What is kept of the body, and of each header.
const KEPT_BODY: usize = 4096;
const KEPT_HEADER: usize = 1024;
const MOST_HEADERS: usize = 64;
/// Headers that carry a credential: their values are not logged.
const SECRET_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie", "x-api-key"];

pub struct RefusalLog {
    last: Mutex<HashMap<String, Instant>>,
    writing: Arc<Semaphore>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog { last: Mutex::new(HashMap::new()), writing: Arc::new(Semaphore::new(MOST_WRITING)) }
    }
}

/// Text Postgres keeps, at most `most` bytes of it (cut on a character boundary).
fn kept_text(bytes: &[u8], most: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(most)]).replace('\0', "\u{fffd}");
    text
}

fn kept_headers(headers: &HeaderMap) -> Value {
    let kept: Map<String, Value> = headers
        .iter()
        .take(MOST_HEADERS)
        .map(|(name, value)| {
            let value = match SECRET_HEADERS.contains(&name.as_str()) {
                true => "[redacted]".to_owned(),
                false => kept_text(value.as_bytes(), KEPT_HEADER),
            };
            (name.as_str().to_owned(), Value::String(value))
        })
        .collect();
    Value::Object(kept)
}

impl RefusalLog {
    /// Logs a refusal of `source` (its status and why), unless one was logged
    /// for it within [`APART`], or too many writes are in flight.
    pub fn record(&self, state: &AppState, source: &Source, status: u16, why: &str, headers: &HeaderMap, body: &[u8]) {
        if status >= 500 {
            return;
        }
        {
            let mut last = self.last.lock().expect("never poisoned");
            let now = Instant::now();
            if last.get(source.id.as_str()).is_some_and(|at| now.duration_since(*at) < APART) {
                return;
            }
            if last.len() >= 10_000 {
                last.retain(|_, at| now.duration_since(*at) < APART);
            }
            last.insert(source.id.to_string(), now);
        }
        let Ok(permit) = self.writing.clone().try_acquire_owned() else { return };
        let refused = Refused {
            id: source_refusals::log_id(),
            source_id: source.id.clone(),
            status_code: status as i16,
            error_text: kept_text(why.as_bytes(), KEPT_HEADER),
            headers: kept_headers(headers),
            payload: kept_text(body, KEPT_BODY),
            created_at: chrono::Utc::now(),
        };
        let (state, tenant) = (state.clone(), source.tenant_id.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let written = db::bounded(state.db_budget(), async {
                let conn = db::conn(&state.db).await?;
                source_refusals::insert(&**conn, &tenant, &refused).await
            })
            .await;
            if let Err(e) = written {
                tracing::warn!(error = %e, source = %refused.source_id, "a refused request could not be logged");
            }
        });
    }
}
