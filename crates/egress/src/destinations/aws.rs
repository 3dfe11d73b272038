//! The AWS destinations, `sqs`, `sns` and `eventBridge`, through the AWS SDK for
//! Rust. The SDK's requests go out through Hookgate's guarded HTTP client (a
//! bridge below), so the SSRF guard, the proxy and the attempt's bound hold for
//! them as for a webhook; the SDK's own retries are off (the schedule retries).

use std::{error::Error as StdError, fmt, time::Duration};

use aws_credential_types::Credentials;
use aws_smithy_runtime_api::{
    client::{
        http::{HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector},
        orchestrator::{HttpRequest, HttpResponse},
        result::ConnectorError,
        runtime_components::RuntimeComponents,
    },
    http::StatusCode,
};
use aws_smithy_types::{body::SdkBody, retry::RetryConfig};
use aws_types::region::Region;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{
    config::{AwsAccess, EventBridge, Sns, Sqs},
    Failure, Outbound, Reached,
};
use crate::deliver::send::{Outcome, Sender};

/// The SDK's HTTP client: each request through the guarded [`Sender`], within `bound`.
#[derive(Clone)]
struct Bridge {
    sender: Sender,
    bound: Duration,
    /// Where the answers came from: a private network's are kept only if the operator says.
    reached: Reached,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bridge")
    }
}

/// Why the bridge did not get an answer: carried through the SDK's error to say
/// the attempt's outcome (blocked, timeout, connect error) as a webhook's would.
#[derive(Debug)]
struct Unanswered(Failure);

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl StdError for Unanswered {}

impl HttpConnector for Bridge {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let this = self.clone();
        HttpConnectorFuture::new(async move {
            let method = reqwest::Method::from_bytes(request.method().as_bytes())
                .map_err(|e| ConnectorError::other(e.into(), None))?;
            let mut headers = HeaderMap::new();
            for (name, value) in request.headers().iter() {
                if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
                    headers.append(n, v);
                }
            }
            let body = bytes::Bytes::copy_from_slice(request.body().bytes().unwrap_or_default());
            let answered = this.sender.exchange(method, request.uri(), headers, body, this.bound).await;
            let got = answered.map_err(|sent| {
                let failure = Failure { outcome: sent.outcome, text: sent.body };
                match failure.outcome {
                    Outcome::Timeout => ConnectorError::timeout(Box::new(Unanswered(failure))),
                    _ => ConnectorError::io(Box::new(Unanswered(failure))),
                }
            })?;
            this.reached.private_if(got.private);
            let status = StatusCode::try_from(got.status).map_err(|e| ConnectorError::other(e.into(), None))?;
            let mut res = HttpResponse::new(status, SdkBody::from(got.body));
            for (name, value) in got.headers.iter() {
                if let Ok(v) = value.to_str() {
                    res.headers_mut().append(name.as_str().to_owned(), v.to_owned());
                }
            }
            Ok(res)
        })
    }
}

impl HttpClient for Bridge {
    fn http_connector(&self, _: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// What an SDK error becomes: the bridge's own failure when it had one, else the
/// service's answer (a refusal).
fn failure<E: StdError + 'static>(
    service: &str,
    e: aws_smithy_runtime_api::client::result::SdkError<E, HttpResponse>,
) -> Failure {
    use aws_smithy_runtime_api::client::result::SdkError;
    let mut source: Option<&(dyn StdError + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(Unanswered(f)) = s.downcast_ref::<Unanswered>() {
            return Failure { outcome: f.outcome, text: f.text.clone() };
        }
        source = s.source();
    }
    match &e {
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            Failure::refused(format!("{service} refused it ({status}): {}", chain(s.err())))
        }
        other => Failure::connect(format!("{service}: {}", chain(other))),
    }
}

/// An error and its sources, as one line.
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The settings every AWS client is built with.
struct Setup {
    credentials: Credentials,
    region: Region,
    endpoint_url: Option<String>,
    bridge: Bridge,
}

fn setup(access: &AwsAccess, region: &str, sender: &Sender, bound: Duration, reached: &Reached) -> Setup {
    Setup {
        credentials: Credentials::new(&access.access_key_id, &access.secret_access_key, None, None, "hookgate"),
        region: Region::new(region.to_owned()),
        endpoint_url: access.endpoint_url.clone(),
        bridge: Bridge { sender: sender.clone(), bound, reached: reached.clone() },
    }
}

/// The message's attributes: a consumer verifies it as a webhook receiver would.
fn attributes<'a>(out: &'a Outbound<'a>) -> impl Iterator<Item = (&'a str, &'a str)> {
    out.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain([("content-type", out.content_type)])
}

/// The payload as text: as sent when it is UTF-8, else base64 (said by an attribute).
fn text_body(out: &Outbound<'_>) -> (String, bool) {
    match std::str::from_utf8(out.payload) {
        Ok(s) => (s.to_owned(), false),
        Err(_) => {
            use base64::Engine;
            (base64::engine::general_purpose::STANDARD.encode(out.payload), true)
        }
    }
}

pub(super) async fn sqs(
    cfg: &Sqs,
    sender: &Sender,
    out: &Outbound<'_>,
    bound: Duration,
    reached: &Reached,
) -> Result<String, Failure> {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let s = setup(&cfg.access(), &cfg.region(), sender, bound, reached);
    let mut conf = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .credentials_provider(s.credentials)
        .region(s.region)
        .retry_config(RetryConfig::disabled())
        .http_client(s.bridge);
    if let Some(url) = s.endpoint_url {
        conf = conf.endpoint_url(url);
    }
    let client = aws_sdk_sqs::Client::from_conf(conf.build());
    let (body, base64) = text_body(out);
    let mut send = client.send_message().queue_url(&cfg.queue_url).message_body(body);
    let attr = |v: &str| MessageAttributeValue::builder().data_type("String").string_value(v).build();
    for (name, value) in attributes(out).chain(base64.then_some(("content-transfer-encoding", "base64"))) {
        send = send.message_attributes(name, attr(value).map_err(|e| Failure::refused(e.to_string()))?);
    }
    // A FIFO queue: one group per application (its order), and the message id as the
    // deduplication id, so SQS itself drops a copy sent again within five minutes.
    if cfg.queue_url.ends_with(".fifo") {
        send = send.message_group_id(out.app_id).message_deduplication_id(out.msg_id);
    }
    let sent = send.send().await.map_err(|e| failure("SQS", e))?;
    Ok(format!("accepted by SQS as {}", sent.message_id().unwrap_or("(no id)")))
}

pub(super) async fn sns(
    cfg: &Sns,
    sender: &Sender,
    out: &Outbound<'_>,
    bound: Duration,
    reached: &Reached,
) -> Result<String, Failure> {
    use aws_sdk_sns::types::MessageAttributeValue;
    let s = setup(&cfg.access(), &cfg.region(), sender, bound, reached);
    let mut conf = aws_sdk_sns::Config::builder()
        .behavior_version_latest()
        .credentials_provider(s.credentials)
        .region(s.region)
        .retry_config(RetryConfig::disabled())
        .http_client(s.bridge);
    if let Some(url) = s.endpoint_url {
        conf = conf.endpoint_url(url);
    }
    let client = aws_sdk_sns::Client::from_conf(conf.build());
    let (body, base64) = text_body(out);
    let mut publish = client.publish().topic_arn(&cfg.topic_arn).message(body);
    let attr = |v: &str| MessageAttributeValue::builder().data_type("String").string_value(v).build();
    for (name, value) in attributes(out).chain(base64.then_some(("content-transfer-encoding", "base64"))) {
        publish = publish.message_attributes(name, attr(value).map_err(|e| Failure::refused(e.to_string()))?);
    }
    if cfg.topic_arn.ends_with(".fifo") {
        publish = publish.message_group_id(out.app_id).message_deduplication_id(out.msg_id);
    }
    let sent = publish.send().await.map_err(|e| failure("SNS", e))?;
    Ok(format!("accepted by SNS as {}", sent.message_id().unwrap_or("(no id)")))
}

pub(super) async fn event_bridge(
    cfg: &EventBridge,
    sender: &Sender,
    out: &Outbound<'_>,
    bound: Duration,
    reached: &Reached,
) -> Result<String, Failure> {
    use aws_sdk_eventbridge::types::PutEventsRequestEntry;
    let s = setup(&cfg.access(), &cfg.region(), sender, bound, reached);
    let mut conf = aws_sdk_eventbridge::Config::builder()
        .behavior_version_latest()
        .credentials_provider(s.credentials)
        .region(s.region)
        .retry_config(RetryConfig::disabled())
        .http_client(s.bridge);
    if let Some(url) = s.endpoint_url {
        conf = conf.endpoint_url(url);
    }
    let client = aws_sdk_eventbridge::Client::from_conf(conf.build());
    let entry = PutEventsRequestEntry::builder()
        .event_bus_name(&cfg.event_bus_name)
        .source("hookgate")
        .detail_type(cfg.detail_type.as_deref().unwrap_or(out.event_type))
        .detail(detail(out).to_string())
        .build();
    let put = client.put_events().entries(entry).send().await.map_err(|e| failure("EventBridge", e))?;
    match put.entries().first() {
        Some(e) if e.error_code().is_none() => {
            Ok(format!("accepted by EventBridge as {}", e.event_id().unwrap_or("(no id)")))
        }
        Some(e) => Err(Failure::refused(format!(
            "EventBridge refused it: {} {}",
            e.error_code().unwrap_or_default(),
            e.error_message().unwrap_or_default()
        ))),
        None => Err(Failure::refused("EventBridge answered no entry")),
    }
}

/// An EventBridge event's `detail`: the message's id, type and payload (JSON as
/// it is, other bodies as text). Documented in docs/destinations.md.
fn detail(out: &Outbound<'_>) -> serde_json::Value {
    let payload = serde_json::from_slice::<serde_json::Value>(out.payload)
        .unwrap_or_else(|_| serde_json::Value::String(text_body(out).0));
    serde_json::json!({
        "id": out.msg_id,
        "eventType": out.event_type,
        "eventId": out.event_id,
        "timestamp": out.timestamp,
        "payload": payload,
    })
}
