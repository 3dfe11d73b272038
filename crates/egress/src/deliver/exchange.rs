//! One request of any method through the guarded client, its answer read
//! whole: for a library that parses the answer itself (the AWS SDK, through
//! `destinations::aws`), with the checks an attempt makes.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

use super::send::{describe, failed, find_blocked, Outcome, Sender, Sent};
use crate::ssrf::classify;

/// A response read whole (up to [`MOST_EXCHANGED`]), for a client that parses it
/// (the AWS SDK through `destinations::aws`).
pub struct Exchanged {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
    /// The answer came from a private network: the address dialled, or through
    /// the operator's proxy, what the target's name resolved to.
    pub private: bool,
}

/// The most of a response [`Sender::exchange`] reads.
pub const MOST_EXCHANGED: usize = 1 << 20;

impl Sender {
    /// The guarded client itself, for a library that sends its own requests
    /// (`object_store`): its resolver checks names; check an address literal
    /// first with [`Sender::allows_target`].
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// Whether a request to this URL may go, as an attempt checks it before
    /// sending: an address literal against the guard, and through the operator's
    /// proxy (which resolves names itself) every address the name has. `Ok(true)`
    /// when, through the proxy, the target is on a private network.
    pub async fn allows_target(&self, raw: &str) -> Result<bool, String> {
        let url = url::Url::parse(raw).map_err(|e| format!("invalid URL: {e}"))?;
        self.guard.refresh_own().await;
        self.guard.check_url(&url).map_err(|b| b.to_string())?;
        match self.proxied {
            true => self.check_proxied_target(&url).await.map_err(|sent| sent.body),
            false => Ok(false),
        }
    }

    /// Whether requests go through the operator's proxy (the connection's address is then the proxy's).
    pub fn proxied(&self) -> bool {
        self.proxied
    }

    /// One request of any method through the guarded client, within `bound`: the
    /// same checks as an attempt (an address literal, the proxy's target), no
    /// retry, and the response read whole. The error says why, as an attempt would.
    pub async fn exchange(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: HeaderMap,
        body: bytes::Bytes,
        bound: Duration,
    ) -> Result<Exchanged, Sent> {
        let started = Instant::now();
        let url =
            url::Url::parse(url).map_err(|e| failed(Outcome::ConnectError, format!("invalid URL: {e}"), started))?;
        self.guard.refresh_own().await;
        self.guard.check_url(&url).map_err(|b| failed(Outcome::Blocked, b.to_string(), started))?;
        let mut private = false;
        if self.proxied {
            private = match tokio::time::timeout(bound, self.check_proxied_target(&url)).await {
                Ok(checked) => checked?,
                Err(_) => return Err(failed(Outcome::Timeout, "timed out resolving the host".into(), started)),
            };
        }
        let Some(bound) = bound.checked_sub(started.elapsed()).filter(|b| !b.is_zero()) else {
            return Err(failed(Outcome::Timeout, "timed out resolving the host".into(), started));
        };
        let sent = self.client.request(method, url).headers(headers).body(body).timeout(bound).send().await;
        let mut res = sent.map_err(|e| match find_blocked(&e) {
            Some(b) => failed(Outcome::Blocked, b.to_string(), started),
            None if e.is_timeout() => failed(Outcome::Timeout, describe(&e), started),
            None => failed(Outcome::ConnectError, describe(&e), started),
        })?;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        private = private || (!self.proxied && res.remote_addr().is_some_and(|a| classify(a.ip()).is_some()));
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(|e| failed(Outcome::ConnectError, describe(&e), started))? {
            if body.len() + chunk.len() > MOST_EXCHANGED {
                return Err(failed(Outcome::ConnectError, "the response is larger than 1 MiB".into(), started));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Exchanged { status, headers, body: body.into(), private })
    }
}
