//! Small documents fetched for another crate from operator-allowed URLs (PayPal's
//! signing certificates, for ingress), so that outbound HTTP stays in this crate:
//! no redirect followed, no proxy, bounded in time and in size.

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
}
