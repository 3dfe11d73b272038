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
/// What is kept of the body, of each header, and of the headers in all.
pub const KEPT_BODY: usize = 4096;
const KEPT_HEADER: usize = 1024;
const KEPT_HEADERS: usize = 8192;
/// Header names whose values are not logged: credentials by name (some providers
/// send the source's secret itself as a header: GitLab's `X-Gitlab-Token`, Vapi's
/// `X-Vapi-Secret`), and what a proxy adds that repeats the path, which holds the
/// ingest URL's token.
const SECRET_WORDS: &[&str] = &["auth", "token", "secret", "password", "passwd", "key", "cookie", "session"];
const PATH_HEADERS: &[&str] =
    &["x-original-uri", "x-forwarded-uri", "x-original-url", "x-envoy-original-path", "x-rewrite-url"];

/// Whether a header's value may be a credential (or the ingest URL's token).
fn secret_header(name: &str) -> bool {
    SECRET_WORDS.iter().any(|w| name.contains(w)) || PATH_HEADERS.contains(&name)
}

pub struct RefusalLog {
    last: Mutex<HashMap<String, Instant>>,
    writing: Arc<Semaphore>,
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog { last: Mutex::new(HashMap::new()), writing: Arc::new(Semaphore::new(MOST_WRITING)) }
    }
}

/// Text Postgres keeps (invalid UTF-8 and NUL made U+FFFD), cut to at most
/// `most` bytes on a character boundary.
fn kept_text(bytes: &[u8], most: usize) -> String {
    let mut text = String::from_utf8_lossy(bytes).replace('\0', "\u{fffd}");
    if text.len() > most {
        let mut cut = most;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// The headers, credentials redacted, a repeated one's values joined, within [`KEPT_HEADERS`].
fn kept_headers(headers: &HeaderMap) -> Value {
    let mut kept = Map::new();
    let mut room = KEPT_HEADERS;
    for name in headers.keys() {
        let value = match secret_header(name.as_str()) {
            true => "[redacted]".to_owned(),
            false => {
                let values: Vec<&[u8]> = headers.get_all(name).map(|v| v.as_bytes()).collect();
                kept_text(&values.join(&b", "[..]), KEPT_HEADER)
            }
        };
        let size = name.as_str().len() + value.len();
        if size > room {
            break;
        }
        room -= size;
        kept.insert(name.as_str().to_owned(), Value::String(value));
    }
    Value::Object(kept)
}

/// Whether the source's refusals are logged: only an ingest source's log is read
/// (Svix's ingest API), so only its request's start is kept to log.
pub fn logs(source: &Source) -> bool {
    source.ingest.is_some()
}

impl RefusalLog {
    /// Logs a refusal of `source` (its status and why), unless one was logged
    /// for it within [`APART`], or too many writes are in flight.
    pub fn record(&self, state: &AppState, source: &Source, status: u16, why: &str, headers: &HeaderMap, body: &[u8]) {
        // Nor is a failure of Hookgate's own (5xx) the sender's doing.
        if status >= 500 || !logs(source) {
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
            match written {
                Ok(()) => {}
                // The source was deleted meanwhile: its log went with it.
                Err(e) if e.is_gone_reference() => {}
                Err(e) => {
                    tracing::warn!(error = %e, source = %refused.source_id, "a refused request could not be logged")
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_the_path_are_redacted_repeated_headers_joined_and_text_cut_on_a_character() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("x-gitlab-token", "glpat-secret"),
            ("x-vapi-secret", "s"),
            ("authorization", "Basic eA=="),
            ("x-original-uri", "/in/src_1/tok"),
            ("x-hub-signature-256", "sha256=ab"),
        ] {
            h.insert(k.parse().unwrap(), v.parse().unwrap());
        }
        h.append("x-sig".parse().unwrap(), "a".parse().unwrap());
        h.append("x-sig".parse().unwrap(), "b".parse().unwrap());
        let kept = kept_headers(&h);
        for k in ["x-gitlab-token", "x-vapi-secret", "authorization", "x-original-uri"] {
            assert_eq!(kept[k], "[redacted]", "{k}");
        }
        assert_eq!(kept["x-hub-signature-256"], "sha256=ab");
        assert_eq!(kept["x-sig"], "a, b");
        assert_eq!(kept_text("aé".as_bytes(), 2), "a", "not cut inside é");
        assert_eq!(kept_text(b"a\0\xffb", 100), "a\u{fffd}\u{fffd}b");
    }
}
