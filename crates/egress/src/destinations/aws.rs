//! What the AWS destinations share (`sqs`, `sns`, `eventBridge`, `amazonS3`):
//! their credentials and region, the checks of both, and for the first three the
//! AWS SDK for Rust set up to send through Hookgate's guarded HTTP client (a
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
use aws_smithy_types::body::SdkBody;
use aws_types::region::Region;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{Failure, Outbound, Reached};
use crate::deliver::send::{Outcome, Sender};

/// The SDK's HTTP client: each request through the guarded [`Sender`], within `bound`.
#[derive(Clone)]
pub(super) struct Bridge {
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
pub(super) fn failure<E: StdError + 'static>(
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
pub(super) struct Setup {
    pub credentials: Credentials,
    pub region: Region,
    pub endpoint_url: Option<String>,
    pub bridge: Bridge,
}

pub(super) fn setup(access: &AwsAccess, region: &str, sender: &Sender, bound: Duration, reached: &Reached) -> Setup {
    Setup {
        credentials: Credentials::new(&access.access_key_id, &access.secret_access_key, None, None, "hookgate"),
        region: Region::new(region.to_owned()),
        endpoint_url: access.endpoint_url.clone(),
        bridge: Bridge { sender: sender.clone(), bound, reached: reached.clone() },
    }
}

/// The message's attributes: a consumer verifies it as a webhook receiver would.
pub(super) fn attributes<'a>(out: &'a Outbound<'a>) -> impl Iterator<Item = (&'a str, &'a str)> {
    out.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain([("content-type", out.content_type)])
}

/// The payload as text: as sent when it is UTF-8, else base64 (said by an attribute).
pub(super) fn text_body(out: &Outbound<'_>) -> (String, bool) {
    match std::str::from_utf8(out.payload) {
        Ok(s) => (s.to_owned(), false),
        Err(_) => {
            use base64::Engine;
            (base64::engine::general_purpose::STANDARD.encode(out.payload), true)
        }
    }
}

/// How an AWS destination signs in and where it sends.
#[derive(Debug, Clone)]
pub struct AwsAccess {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub endpoint_url: Option<String>,
}

/// The region an AWS destination names or its queue URL or ARN implies.
pub(super) fn region_of(given: &Option<String>, implied: Option<String>) -> Option<String> {
    given.clone().filter(|r| !r.is_empty()).or(implied)
}

/// `us-east-1` from `https://sqs.us-east-1.amazonaws.com/…` (or `us-east-1.queue.amazonaws.com`).
pub(super) fn region_in_queue_url(url: &str) -> Option<String> {
    let host = url::Url::parse(url).ok()?.host_str()?.to_owned();
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        ["sqs", region, "amazonaws", ..] => Some(region.to_string()),
        [region, "queue", "amazonaws", ..] => Some(region.to_string()),
        _ => None,
    }
}

/// `us-east-1` from `arn:aws:sns:us-east-1:123456789012:topic`.
pub(super) fn region_in_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    (parts.len() >= 6 && parts[0] == "arn").then(|| parts[3].to_owned()).filter(|r| !r.is_empty())
}

/// An AWS destination's configuration: its own fields, then the ones every AWS
/// destination has (as Svix names them, in this order), and its `access()`,
/// `region()` (given, or implied as `implied by` says) and checks.
macro_rules! aws_config {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident: $ty:ty,)* }
     region implied by $implied:expr;) => {
        $(#[$m])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$fm])* pub $field: $ty,)*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub region: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub access_key_id: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub secret_access_key: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub role_arn: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub external_id: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub endpoint_url: Option<String>,
        }

        super::aws::aws_access!($name, $implied);
    };
}
pub(super) use aws_config;

/// An AWS destination's `access()`, `region()` (given, or implied by `$implied`)
/// and `check_aws()`, for a configuration with the usual AWS fields.
macro_rules! aws_access {
    ($t:ty, $implied:expr) => {
        impl $t {
            pub fn access(&self) -> super::aws::AwsAccess {
                super::aws::AwsAccess {
                    access_key_id: self.access_key_id.clone().unwrap_or_default(),
                    secret_access_key: self.secret_access_key.clone().unwrap_or_default(),
                    endpoint_url: self.endpoint_url.clone(),
                }
            }

            pub fn region(&self) -> String {
                let implied: fn(&Self) -> Option<String> = $implied;
                super::aws::region_of(&self.region, implied(self)).unwrap_or_default()
            }

            /// Svix's `…ConfigOut`: the secret key left out, the region as used.
            pub(super) fn shown_aws(&self) -> serde_json::Value {
                let shown = Self { secret_access_key: None, region: Some(self.region()), ..self.clone() };
                serde_json::to_value(shown).expect("a configuration serialises")
            }

            /// The secret key, left out (it is never shown), stays as stored while
            /// the key id, the endpoint URL and the region are the same.
            pub(super) fn keep_aws(&mut self, stored: &Self) {
                let at = (self.access_key_id.clone(), self.endpoint_url.clone(), self.region());
                let was = (stored.access_key_id.clone(), stored.endpoint_url.clone(), stored.region());
                super::aws::keep_secret_key(&mut self.secret_access_key, at, &stored.secret_access_key, was);
            }

            pub(super) fn check_aws(&self, guard: &crate::ssrf::Guard) -> Result<(), super::kind::Invalid> {
                use super::kind::invalid;
                if self.role_arn.is_some() || self.external_id.is_some() {
                    return Err(invalid(
                        "`roleArn` and `externalId` are not supported (assuming a role needs STS): \
                         give `accessKeyId` and `secretAccessKey`",
                    ));
                }
                if self.access_key_id.as_deref().unwrap_or_default().is_empty()
                    || self.secret_access_key.as_deref().unwrap_or_default().is_empty()
                {
                    return Err(invalid("`accessKeyId` and `secretAccessKey` are required"));
                }
                let region = self.region();
                let well_formed = region.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
                if region.is_empty() || region.len() > 32 || !well_formed {
                    // It becomes part of the service's host name.
                    return Err(invalid("`region` is required: an AWS region name such as `eu-west-1`"));
                }
                if let Some(e) = &self.endpoint_url {
                    super::kind::check_http_url(guard, e, "endpointUrl")?;
                }
                Ok(())
            }
        }
    };
}
pub(super) use aws_access;

/// Where a secret key is used: the key id, the endpoint URL and the region.
pub(super) type Where = (Option<String>, Option<String>, String);

/// A secret key left out (it is never shown) stays as stored while the key id,
/// the endpoint URL and the region are the same.
pub(super) fn keep_secret_key(new: &mut Option<String>, new_at: Where, old: &Option<String>, old_at: Where) {
    if new.as_deref().is_none_or(|s| s.is_empty() || s == super::kind::REDACTED) && new_at == old_at {
        new.clone_from(old);
    }
}

/// A client of an AWS SDK crate (`aws_sdk_sqs`, …) set up as every AWS
/// destination's is: the destination's credentials and region, no SDK retries
/// (the schedule retries), requests through the guarded client, and the
/// destination's `endpointUrl` if it gives one.
macro_rules! sdk_client {
    ($sdk:ident, $setup:expr) => {{
        let s = $setup;
        let mut conf = $sdk::Config::builder()
            .behavior_version_latest()
            .credentials_provider(s.credentials)
            .region(s.region)
            .retry_config(aws_smithy_types::retry::RetryConfig::disabled())
            .http_client(s.bridge);
        if let Some(url) = s.endpoint_url {
            conf = conf.endpoint_url(url);
        }
        $sdk::Client::from_conf(conf.build())
    }};
}
pub(super) use sdk_client;
