//! The AWS destinations' configurations (`sqs`, `sns`, `eventBridge`,
//! `amazonS3`): their fields as Svix names them, the region each implies, and the
//! checks they share.

use serde::{Deserialize, Serialize};

use super::config::{invalid, Invalid};
use crate::ssrf::Guard;

/// `sqs`: one SQS message per message (`queueUrl`; a `.fifo` queue keeps the
/// application's order and dedupes by message id).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sqs {
    pub queue_url: String,
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

/// `sns`: one SNS publish per message to `topicArn`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sns {
    pub topic_arn: String,
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

/// `eventBridge`: one event per message on `eventBusName`. `endpointUrl` is
/// Hookgate's own addition (Svix's type has none), for compatible servers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBridge {
    pub event_bus_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_type: Option<String>,
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

/// `amazonS3`: one object per message in `bucket`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3 {
    pub bucket: String,
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

/// How an AWS destination signs in and where it sends.
#[derive(Debug, Clone)]
pub struct AwsAccess {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub endpoint_url: Option<String>,
}

/// The region an AWS destination names or its queue URL or ARN implies.
fn region_of(given: &Option<String>, implied: Option<String>) -> Option<String> {
    given.clone().filter(|r| !r.is_empty()).or(implied)
}

/// `us-east-1` from `https://sqs.us-east-1.amazonaws.com/…` (or `us-east-1.queue.amazonaws.com`).
fn region_in_queue_url(url: &str) -> Option<String> {
    let host = url::Url::parse(url).ok()?.host_str()?.to_owned();
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        ["sqs", region, "amazonaws", ..] => Some(region.to_string()),
        [region, "queue", "amazonaws", ..] => Some(region.to_string()),
        _ => None,
    }
}

/// `us-east-1` from `arn:aws:sns:us-east-1:123456789012:topic`.
fn region_in_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    (parts.len() >= 6 && parts[0] == "arn").then(|| parts[3].to_owned()).filter(|r| !r.is_empty())
}

macro_rules! aws_access {
    ($t:ty, $implied:expr) => {
        impl $t {
            pub fn access(&self) -> AwsAccess {
                AwsAccess {
                    access_key_id: self.access_key_id.clone().unwrap_or_default(),
                    secret_access_key: self.secret_access_key.clone().unwrap_or_default(),
                    endpoint_url: self.endpoint_url.clone(),
                }
            }

            pub fn region(&self) -> String {
                let implied: fn(&Self) -> Option<String> = $implied;
                region_of(&self.region, implied(self)).unwrap_or_default()
            }

            pub(super) fn check_aws(&self, guard: &Guard) -> Result<(), Invalid> {
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
                    check_http_url(guard, e, "endpointUrl")?;
                }
                Ok(())
            }
        }
    };
}

aws_access!(Sqs, |c| region_in_queue_url(&c.queue_url));
aws_access!(Sns, |c| region_in_arn(&c.topic_arn));
aws_access!(EventBridge, |c| region_in_arn(&c.event_bus_name));
aws_access!(S3, |_| None);

/// An absolute http(s) URL whose host the tenant may reach.
pub(super) fn check_http_url(guard: &Guard, raw: &str, field: &str) -> Result<(), Invalid> {
    let url = url::Url::parse(raw).map_err(|e| invalid(format!("`{field}` is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(format!("`{field}` must be an absolute http or https URL")));
    }
    guard.check_url(&url).map_err(|b| invalid(format!("`{field}` is refused: {b}")))
}
