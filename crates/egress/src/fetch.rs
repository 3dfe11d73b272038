//! Small documents fetched for another crate from operator-allowed URLs (PayPal's
//! signing certificates, for ingress; a Svix-API server's pages, for the
//! operator's `hookgate import svix`), so that outbound HTTP stays in this
//! crate: no redirect followed, no proxy, bounded in time and in size.

use std::time::Duration;

/// Why a fetch gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// Unreachable, timed out, or answered other than 2xx: worth retrying later.
    #[error("{0}")]
    Unavailable(String),
    #[error("the document is larger than {0} bytes")]
    TooLarge(usize),
}

/// A client for small GETs.
pub struct Fetcher {
    client: reqwest::Client,
}

impl Fetcher {
    /// `timeout` bounds the connection and the whole request.
    pub fn new(timeout: Duration) -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .no_proxy()
            .build()
            .expect("a TLS client builds");
        Fetcher { client }
    }

    /// The body at `url`, if it answers 2xx within `max_bytes`. The caller checks
    /// the URL against its allow-list first.
    pub async fn get(&self, url: &url::Url, max_bytes: usize) -> Result<Vec<u8>, FetchError> {
        let unavailable = |e: reqwest::Error| FetchError::Unavailable(e.without_url().to_string());
        let mut res = self.client.get(url.clone()).send().await.map_err(unavailable)?;
        if !res.status().is_success() {
            return Err(FetchError::Unavailable(format!("{url} answered {}", res.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(unavailable)? {
            if body.len() + chunk.len() > max_bytes {
                return Err(FetchError::TooLarge(max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A GET with a bearer token, answered whatever its status: the status, the
    /// `Retry-After` seconds if given, and the body (at most `max_bytes`). The
    /// caller named the URL (the operator, on the command line).
    pub async fn get_authorized(&self, url: &url::Url, token: &str, max_bytes: usize) -> Result<Answer, FetchError> {
        let unavailable = |e: reqwest::Error| FetchError::Unavailable(e.without_url().to_string());
        let mut res = self.client.get(url.clone()).bearer_auth(token).send().await.map_err(unavailable)?;
        let status = res.status().as_u16();
        let retry_after = res.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(unavailable)? {
            if body.len() + chunk.len() > max_bytes {
                return Err(FetchError::TooLarge(max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer { status, retry_after, body })
    }
}

/// What [`Fetcher::get_authorized`] got.
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: Vec<u8>,
}
