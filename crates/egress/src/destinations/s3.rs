//! The `amazonS3` destination: one object per message, written through the
//! `object_store` crate (as the archive is) with Hookgate's guarded HTTP client,
//! its key the message id, so a message written twice is one object.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use object_store::{
    aws::AmazonS3Builder,
    client::{HttpClient, HttpError, HttpRequest, HttpResponse, HttpResponseBody, HttpService},
    path::Path,
    Attribute, Attributes, ClientOptions, ObjectStore, PutOptions, RetryConfig,
};

use hookgate_shared::status::EndpointKind;
use serde_json::Value;

use super::{
    aws::aws_config,
    kind::{http_dialled, invalid, Invalid, Kind},
    Failure, HandOver, Outbound, Reached,
};
use crate::{deliver::send::Sender, ssrf::Guard};

aws_config! {
    /// `amazonS3`: one object per message in `bucket`.
    pub struct S3 {
        pub bucket: String,
    }
    region implied by |_| None;
}

impl Kind for S3 {
    const KIND: EndpointKind = EndpointKind::AmazonS3;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        let ok = (3..=63).contains(&self.bucket.len())
            && self.bucket.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.');
        if !ok {
            return Err(invalid("`bucket` must be an S3 bucket name (3 to 63 of a-z, 0-9, `-`, `.`)"));
        }
        self.check_aws(guard)
    }

    fn locator(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    fn shown(&self, _names_only: bool) -> Value {
        self.shown_aws()
    }

    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.keep_aws(stored);
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        self.endpoint_url.as_deref().and_then(|u| http_dialled("endpointUrl", u)).into_iter().collect()
    }

    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
        put(self, at.sender, out, at.bound, at.reached).await
    }
}

/// Gives `object_store` the guarded client: the SSRF guard's resolver and the
/// proxy hold for its requests as for a webhook's.
#[derive(Debug)]
struct Guarded(reqwest::Client, Noted);

impl object_store::client::HttpConnector for Guarded {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Capped(self.0.clone(), self.1.clone())))
    }
}

/// Where an answer came from, noted from the connection it arrived on (not
/// through the operator's proxy, whose address that would be).
#[derive(Clone)]
struct Noted {
    reached: Reached,
    direct: bool,
}

impl std::fmt::Debug for Noted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Noted")
    }
}

/// The most of an answer other than 2xx that is read: `object_store` reads an
/// error's body whole into memory before it says what failed, and the server
/// is the tenant's to choose.
const MOST_ERROR_BODY: usize = 64 * 1024;

/// The guarded client, with an answer other than 2xx cut to [`MOST_ERROR_BODY`].
#[derive(Debug)]
struct Capped(reqwest::Client, Noted);

#[async_trait::async_trait]
impl HttpService for Capped {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let res = HttpService::call(&self.0, req).await?;
        if let Some(info) = res.extensions().get::<hyper_util::client::legacy::connect::HttpInfo>() {
            if self.1.direct {
                self.1.reached.dialled(info.remote_addr());
            }
        }
        if res.status().is_success() {
            return Ok(res);
        }
        let (mut parts, body) = res.into_parts();
        parts.headers.remove(reqwest::header::CONTENT_LENGTH);
        let mut stream = body.bytes_stream();
        let mut kept = Vec::new();
        while let Some(chunk) = stream.next().await {
            // A body cut short says no less than the status did.
            let Ok(chunk) = chunk else { break };
            let room = MOST_ERROR_BODY - kept.len();
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if kept.len() >= MOST_ERROR_BODY {
                break;
            }
        }
        // Cut at a character, so the text it is read as still decodes.
        if let Err(e) = std::str::from_utf8(&kept) {
            if e.error_len().is_none() {
                kept.truncate(e.valid_up_to());
            }
        }
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::from(bytes::Bytes::from(kept))))
    }
}

/// Where a message's object goes: `{app}/{day}/{msg}` under the bucket, so a
/// day's messages of an application list together. Documented in docs/destinations.md.
pub(super) fn object_key(out: &Outbound<'_>) -> String {
    format!("{}/{}/{}", out.app_id, out.created_at.format("%Y-%m-%d"), out.msg_id)
}

async fn put(
    cfg: &S3,
    sender: &Sender,
    out: &Outbound<'_>,
    bound: Duration,
    reached: &Reached,
) -> Result<String, Failure> {
    let access = cfg.access();
    // `object_store` sends through the guarded client, whose resolver checks the
    // names it dials; an address literal (not resolved) and a name the operator's
    // proxy resolves are checked here, on the URL it will send to.
    let target = match &access.endpoint_url {
        Some(e) => e.clone(),
        None => format!("https://s3.{}.amazonaws.com/", cfg.region()),
    };
    let private = sender
        .allows_target(&target)
        .await
        .map_err(|b| Failure { outcome: crate::deliver::send::Outcome::Blocked, text: b })?;
    reached.private_if(private);
    let noted = Noted { reached: reached.clone(), direct: !sender.proxied() };
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(&cfg.bucket)
        .with_region(cfg.region())
        .with_access_key_id(&access.access_key_id)
        .with_secret_access_key(&access.secret_access_key)
        .with_http_connector(Guarded(sender.client(), noted))
        // The retry schedule retries; one attempt is one request.
        .with_retry(RetryConfig { max_retries: 0, retry_timeout: bound, ..Default::default() })
        .with_client_options(ClientOptions::new().with_timeout(bound));
    if let Some(endpoint) = &access.endpoint_url {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    let store: Arc<dyn ObjectStore> =
        Arc::new(builder.build().map_err(|e| Failure::refused(format!("the S3 settings are refused: {e}")))?);
    let key = object_key(out);
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, out.content_type.to_owned().into());
    for (name, value) in out.headers {
        attributes.insert(Attribute::Metadata(name.clone().into()), value.clone().into());
    }
    let options = PutOptions { attributes, ..Default::default() };
    let body = bytes::Bytes::copy_from_slice(out.payload);
    match store.put_opts(&Path::from(key.as_str()), body.into(), options).await {
        Ok(_) => Ok(format!("written to S3 as {key}")),
        Err(e) => Err(match e {
            // S3 answered and did not take it (its own error kinds for 401, 403 and 404).
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::NotFound { .. } => Failure::refused(format!("S3 refused it: {e}")),
            object_store::Error::Generic { ref source, .. } if answered(source.as_ref()) => {
                Failure::refused(format!("S3 refused it: {e}"))
            }
            other => Failure::connect(format!("writing to S3 failed: {other}")),
        }),
    }
}

/// Whether S3 answered with a status (`object_store` says "non-2xx status code"),
/// rather than not answering.
fn answered(e: &(dyn std::error::Error + 'static)) -> bool {
    e.to_string().contains("status code")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn an_error_answer_is_read_only_as_far_as_the_cap() {
        // A server on loopback answering 500 with 4 MiB of body.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            // Two-byte characters, with the cap falling inside one.
            let body = [b"x".as_slice(), &"\u{e9}".repeat(2 << 20).into_bytes()].concat();
            let head = format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&body).await;
        });
        let req = http::Request::builder()
            .method("PUT")
            .uri(format!("http://{addr}/bucket/key"))
            .body(object_store::client::HttpRequestBody::from(bytes::Bytes::from_static(b"{}")))
            .unwrap();
        let noted = Noted { reached: Reached::default(), direct: true };
        let res = Capped(reqwest::Client::new(), noted.clone()).call(req).await.unwrap();
        assert!(noted.reached.private(), "the answer came from loopback, as dialled");
        assert_eq!(res.status().as_u16(), 500);
        let body = res.into_body().bytes().await.unwrap();
        assert_eq!(body.len(), MOST_ERROR_BODY - 1, "cut at the character before the cap");
        assert!(std::str::from_utf8(&body).is_ok());
    }
}
