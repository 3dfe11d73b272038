//! One HTTP attempt: sign, send through the SSRF-guarded client, classify, and
//! keep the first 4 KiB of the response.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use reqwest::{
    header::{HeaderMap, HeaderName, HeaderValue},
    redirect, StatusCode,
};

use tracing::Instrument;

use crate::ssrf::{classify, Blocked, Guard, GuardedResolver};

/// Response bytes kept per attempt.
pub const KEEP_RESPONSE: usize = 4096;

/// How long an idle connection to a receiver is kept for the next delivery.
const IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// How an attempt ended, as `hookgate_delivery_attempts_total{outcome}` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Http4xx,
    Http5xx,
    /// A status that is neither 2xx, 4xx nor 5xx (1xx, 3xx): not a success.
    HttpOther,
    Timeout,
    ConnectError,
    Blocked,
    /// A destination other than HTTP answered and did not take the message (a
    /// broker's return or nack, a database's error).
    Refused,
    /// A broker took the message and its confirm was lost (the connection broke
    /// first): it may be there, and the retry may repeat it.
    Unconfirmed,
    /// No request went: the endpoint's OAuth token could not be had (the token
    /// server refused or failed), or its TLS settings could not be used.
    AuthFailed,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Http4xx => "http_4xx",
            Outcome::Http5xx => "http_5xx",
            Outcome::HttpOther => "http_other",
            Outcome::Timeout => "timeout",
            Outcome::ConnectError => "connect_error",
            Outcome::Blocked => "blocked",
            Outcome::Refused => "refused",
            Outcome::Unconfirmed => "unconfirmed",
            Outcome::AuthFailed => "auth_failed",
        }
    }
}

/// What one attempt produced.
#[derive(Debug, Clone)]
pub struct Sent {
    pub outcome: Outcome,
    /// 0 when no response arrived.
    pub status: u16,
    pub body: String,
    pub duration: Duration,
    /// `Retry-After` in seconds, on 429 and 503.
    pub retry_after: Option<Duration>,
}

/// A request ready to send.
pub struct Request {
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// `PUT` rather than `POST` (a transformation's choice).
    pub put: bool,
}

/// The shared HTTP client: one connection pool for every delivery of the process.
#[derive(Clone)]
pub struct Sender {
    pub(super) client: reqwest::Client,
    /// The whole attempt's bound, a retry on a fresh connection included.
    timeout: Duration,
    pub(super) guard: Guard,
    /// Deliveries go through the operator's proxy, which resolves the target's
    /// name itself: the guard then checks the name's addresses before sending.
    pub(super) proxied: bool,
    /// Whether the body of a response from a private address (one an allow-list
    /// opened) is kept: off, a portal link pointed at an internal service reads
    /// its status, never what it says.
    record_private: bool,
}

impl Sender {
    /// `proxy` is the operator's `HOOKGATE_EGRESS_PROXY` (validated at start);
    /// without it the process's `HTTP_PROXY`-style variables are ignored, since a
    /// proxy would resolve names past the guard.
    pub fn new(
        guard: Guard,
        connect_timeout: Duration,
        timeout: Duration,
        proxy: Option<&str>,
        record_private: bool,
    ) -> Self {
        Self::build(guard, connect_timeout, timeout, proxy, record_private, None, None)
            .expect("the HTTP client builds with static settings")
    }

    /// A sender without a proxy whose names `lookup` resolves (a test's, to make a
    /// name answer as it chooses); the guard holds as ever.
    pub fn resolving_with(
        guard: Guard,
        connect_timeout: Duration,
        timeout: Duration,
        lookup: hookgate_shared::own_services::Lookup,
    ) -> Self {
        Self::build(guard, connect_timeout, timeout, None, true, Some(lookup), None)
            .expect("the HTTP client builds with static settings")
    }

    pub(super) fn build(
        guard: Guard,
        connect_timeout: Duration,
        timeout: Duration,
        proxy: Option<&str>,
        record_private: bool,
        lookup: Option<hookgate_shared::own_services::Lookup>,
        tls: Option<&crate::auth::tls::Tls>,
    ) -> Result<Self, String> {
        let proxy_host = proxy.and_then(|p| url::Url::parse(p).ok()?.host_str().map(str::to_owned));
        let builder = reqwest::Client::builder();
        let builder = match proxy {
            Some(p) => builder.proxy(reqwest::Proxy::all(p).expect("HOOKGATE_EGRESS_PROXY is validated at start")),
            None => builder.no_proxy(),
        };
        // An endpoint's client certificate and server CA, when it has them.
        let builder = match tls {
            Some(tls) => tls.apply(builder)?,
            None => builder,
        };
        let client = builder
            .dns_resolver(Arc::new(GuardedResolver { guard: guard.clone(), proxy_host, lookup }))
            // The resolver has no port: Hookgate's own servers are refused on the connection made.
            .connector_layer(super::refuse_own::RefuseOwn(guard.clone()))
            .connect_timeout(connect_timeout)
            .timeout(timeout)
            // A redirect could lead anywhere; receivers must answer themselves.
            .redirect(redirect::Policy::none())
            .user_agent(concat!("Hookgate/", env!("CARGO_PKG_VERSION")))
            // Shorter than the 5 s after which Node's, actix's, uvicorn's and Apache's
            // servers close an idle connection: a connection they are closing is not
            // picked for the next request (see `send` for the race that is left).
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()
            .map_err(|e| format!("the endpoint's TLS settings cannot be used: {e}"))?;
        Ok(Sender { client, timeout, guard, proxied: proxy.is_some(), record_private })
    }

    /// Whether answers from private networks are kept (`HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES`).
    pub fn records_private(&self) -> bool {
        self.record_private
    }

    /// With a proxy, the target's name is resolved here and checked; the proxy may
    /// resolve it again (a rebinding window this side cannot close).
    /// Returns whether the target is on a private network (an allowed one).
    pub(super) async fn check_proxied_target(&self, url: &url::Url) -> Result<bool, Sent> {
        let Some(url::Host::Domain(name)) = url.host() else { return Ok(literal_private(url)) };
        let started = Instant::now();
        let port = url.port_or_known_default().unwrap_or(80);
        self.guard.refresh_own().await;
        match tokio::net::lookup_host((name, port)).await {
            // The proxy resolves the name again and may dial any of its addresses:
            // every one must pass, not just one.
            Ok(addrs) => {
                self.all_allowed(addrs).map(|a| a.iter().any(|a| classify(a.ip()).is_some())).map_err(|b| Sent {
                    outcome: Outcome::Blocked,
                    status: 0,
                    body: b.to_string(),
                    duration: started.elapsed(),
                    retry_after: None,
                })
            }
            Err(e) => Err(failed(Outcome::ConnectError, format!("cannot resolve the endpoint's host: {e}"), started)),
        }
    }

    /// The addresses, if the guard lets every one of them through.
    fn all_allowed(&self, addrs: impl IntoIterator<Item = SocketAddr>) -> Result<Vec<SocketAddr>, Blocked> {
        let addrs: Vec<SocketAddr> = addrs.into_iter().collect();
        match addrs.iter().find_map(|a| self.guard.check_dial(*a).err()) {
            Some(b) => Err(Blocked { literal: false, ..b }),
            None => Ok(addrs),
        }
    }

    /// [`send_within`](Self::send_within) inside `span` (from `attempt::attempt_span`),
    /// which records the outcome.
    pub async fn send_traced(&self, req: Request, span: tracing::Span, bound: Duration) -> Sent {
        let sent = self.send_within(req, bound).instrument(span.clone()).await;
        if sent.status != 0 {
            span.record("http.response.status_code", sent.status);
        }
        span.record("outcome", sent.outcome.label());
        if sent.outcome != Outcome::Success {
            span.record("otel.status_code", "error");
        }
        sent
    }

    /// The whole attempt's bound.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// One attempt within the sender's timeout.
    pub async fn send(&self, req: Request) -> Sent {
        self.send_within(req, self.timeout).await
    }

    /// One attempt within `bound` (at most the sender's timeout), everything
    /// included: the proxy's name lookup, the connection, a retry on a fresh one,
    /// the response's body.
    pub async fn send_within(&self, req: Request, bound: Duration) -> Sent {
        let bound = bound.min(self.timeout);
        let started = Instant::now();
        let blocked = |b: Blocked| Sent {
            outcome: Outcome::Blocked,
            status: 0,
            body: b.to_string(),
            duration: started.elapsed(),
            retry_after: None,
        };
        let url = match url::Url::parse(&req.url) {
            Ok(u) => u,
            Err(e) => return failed(Outcome::ConnectError, format!("invalid URL: {e}"), started),
        };
        self.guard.refresh_own().await;
        if let Err(b) = self.guard.check_url(&url) {
            return blocked(b);
        }
        let mut private = false;
        if self.proxied {
            match tokio::time::timeout(bound, self.check_proxied_target(&url)).await {
                Ok(Ok(p)) => private = p,
                Ok(Err(refused)) => return refused,
                Err(_) => return failed(Outcome::Timeout, "timed out resolving the endpoint's host".into(), started),
            }
        }
        let body = bytes::Bytes::from(req.body);
        let left = |started: Instant| bound.checked_sub(started.elapsed()).filter(|l| !l.is_zero());
        let Some(first) = left(started) else {
            return failed(Outcome::Timeout, "timed out resolving the endpoint's host".into(), started);
        };
        let method = if req.put { reqwest::Method::PUT } else { reqwest::Method::POST };
        let post = self
            .client
            .request(method.clone(), url.clone())
            .headers(req.headers.clone())
            .body(body.clone())
            .timeout(first);
        let result = match post.send().await {
            // A kept-alive connection the receiver closed as the request went out
            // (its idle timeout and our reuse crossing): nothing was answered, so
            // the request is sent once more, at once, on a new connection, within
            // the attempt's bound. It counts as one attempt, as the receiver saw at
            // most one request it could answer; should it have read the first one,
            // it gets the same `webhook-id` twice, which at-least-once allows.
            Err(e) if closed_before_answer(&e) => match left(started) {
                Some(left) => {
                    self.client.request(method, url).headers(req.headers).body(body).timeout(left).send().await
                }
                None => Err(e),
            },
            sent => sent,
        };
        let mut res = match result {
            Ok(res) => res,
            Err(e) => {
                if let Some(b) = find_blocked(&e) {
                    return blocked(b);
                }
                let outcome = if e.is_timeout() { Outcome::Timeout } else { Outcome::ConnectError };
                return failed(outcome, describe(&e), started);
            }
        };
        let status = res.status();
        let retry_after = retry_after(status, res.headers());
        // Direct, the address dialled; through the proxy, what the target resolved to.
        private = private || (!self.proxied && res.remote_addr().is_some_and(|a| classify(a.ip()).is_some()));
        // Read as ever, private or not: a response left unread closes its
        // connection instead of returning it to the pool.
        let mut body = Vec::new();
        loop {
            match res.chunk().await {
                Ok(Some(chunk)) => {
                    let room = KEEP_RESPONSE - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if body.len() >= KEEP_RESPONSE {
                        break;
                    }
                }
                Ok(None) => break,
                // The status arrived; a body cut short does not change the verdict.
                Err(_) => break,
            }
        }
        let outcome = match status.as_u16() {
            200..=299 => Outcome::Success,
            400..=499 => Outcome::Http4xx,
            500..=599 => Outcome::Http5xx,
            _ => Outcome::HttpOther,
        };
        let body = if private && !self.record_private { PRIVATE_NOT_KEPT.to_owned() } else { response_text(&body) };
        Sent { outcome, status: status.as_u16(), body, duration: started.elapsed(), retry_after }
    }
}

/// What the attempt log keeps of a response from a private network, unless the
/// operator set `HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES`.
pub const PRIVATE_NOT_KEPT: &str = "(the response of a private network is not kept)";

fn literal_private(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => classify(std::net::IpAddr::V4(ip)).is_some(),
        Some(url::Host::Ipv6(ip)) => classify(std::net::IpAddr::V6(ip)).is_some(),
        _ => false,
    }
}

/// What is kept of a response body: text Postgres accepts whatever the endpoint
/// sent. Invalid UTF-8 and NUL (which `text` refuses) become U+FFFD.
pub fn response_text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).replace('\0', "\u{FFFD}")
}

pub(super) fn failed(outcome: Outcome, body: String, started: Instant) -> Sent {
    Sent { outcome, status: 0, body, duration: started.elapsed(), retry_after: None }
}

/// An error and its causes, outermost first.
fn chain<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |err| err.source())
}

/// Whether the connection was closed before any of the response arrived
/// (hyper's "connection closed before message completed").
fn closed_before_answer(e: &reqwest::Error) -> bool {
    chain(e).any(|err| err.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message))
}

pub(super) fn find_blocked(e: &(dyn std::error::Error + 'static)) -> Option<Blocked> {
    chain(e).find_map(|err| err.downcast_ref::<Blocked>().cloned())
}

/// The error and its causes in one line, for the attempt's `response`.
pub(super) fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() { "timed out".to_owned() } else { "connection failed".to_owned() };
    for err in chain(e).skip(1) {
        text.push_str(": ");
        text.push_str(&err.to_string());
    }
    text
}

/// `Retry-After: <seconds>` on 429 and 503.
fn retry_after(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let secs: u64 = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs))
}

/// Builds a header map, skipping what is not a valid header (checked at write time).
pub fn header(map: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
        map.insert(n, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn through_a_proxy_a_name_passes_only_if_every_address_it_has_may_be_dialled() {
        let sender = Sender::new(Guard::new(vec![]), Duration::from_secs(1), Duration::from_secs(1), None, false);
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        let private: SocketAddr = "10.0.0.7:443".parse().unwrap();
        assert!(sender.all_allowed([public]).is_ok());
        // The proxy resolves the name again and may dial the private one.
        assert!(sender.all_allowed([public, private]).is_err());
        let opened = Sender::new(
            Guard::new(vec!["10.0.0.0/24".parse().unwrap()]),
            Duration::from_secs(1),
            Duration::from_secs(1),
            None,
            false,
        );
        assert!(opened.all_allowed([public, private]).is_ok(), "an allowed network passes");
    }

    /// A receiver on 127.0.0.1 that answers the first request of its first
    /// connection, keeps it alive, then closes it on the second request without
    /// answering (its idle timeout crossing our reuse); later connections are
    /// answered. Returns its address and the count of requests it read.
    async fn closing_receiver() -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            for first in [true, false, false, false] {
                let (mut conn, _) = listener.accept().await.unwrap();
                let count = count.clone();
                tokio::spawn(async move {
                    let mut served = 0;
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        // One request: headers, then the body of the length they give.
                        let end = loop {
                            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
                                let len: usize = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .map_or(0, |v| v.trim().parse().unwrap());
                                if buf.len() >= at + 4 + len {
                                    break at + 4 + len;
                                }
                            }
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        buf.drain(..end);
                        count.fetch_add(1, Ordering::SeqCst);
                        if first && served == 1 {
                            return; // closed, unanswered
                        }
                        served += 1;
                        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
                    }
                });
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn a_kept_alive_connection_closed_as_the_request_goes_out_is_one_successful_attempt() {
        let (addr, seen) = closing_receiver().await;
        let sender = Sender::new(
            Guard::new(vec!["127.0.0.0/8".parse().unwrap()]),
            Duration::from_secs(2),
            Duration::from_secs(5),
            None,
            true,
        );
        let request = || Request {
            url: format!("http://{addr}/hook"),
            headers: HeaderMap::new(),
            body: b"{}".to_vec(),
            put: false,
        };
        assert_eq!(sender.send(request()).await.outcome, Outcome::Success, "the first request is answered");
        let second = sender.send(request()).await;
        assert_eq!(second.outcome, Outcome::Success, "the closed connection is not a failed attempt: {}", second.body);
        assert_eq!(second.body, "ok");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3, "sent again once, on a new connection");
    }

    #[test]
    fn any_response_body_becomes_text_postgres_accepts() {
        assert_eq!(response_text(b"a\0b"), "a\u{FFFD}b");
        assert_eq!(response_text(b"\xff\xfe{"), "\u{FFFD}\u{FFFD}{");
        assert_eq!(response_text("ünï".as_bytes()), "ünï");
        assert!(!response_text(&[0u8; 64]).contains('\0'));
    }
}
