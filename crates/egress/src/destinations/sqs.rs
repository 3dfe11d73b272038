//! The `sqs` destination: one SQS message per message, through the AWS SDK.

use aws_smithy_types::retry::RetryConfig;
use hookgate_shared::status::EndpointKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    aws::{attributes, aws_access, failure, setup, text_body},
    kind::{as_value, http_dialled, Invalid, Kind},
    Failure, HandOver, Outbound,
};
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

aws_access!(Sqs, |c| super::aws::region_in_queue_url(&c.queue_url));

impl Kind for Sqs {
    const KIND: EndpointKind = EndpointKind::Sqs;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        super::kind::check_http_url(guard, &self.queue_url, "queueUrl")?;
        self.check_aws(guard)
    }

    fn locator(&self) -> String {
        super::kind::without_password(&self.queue_url, false)
    }

    /// Svix's `…ConfigOut`: the secret key left out, the region as used.
    fn shown(&self, _names_only: bool) -> Value {
        as_value(&Sqs { secret_access_key: None, region: Some(self.region()), ..self.clone() })
    }

    /// The secret key, left out (it is never shown), stays as stored while the
    /// key id, the endpoint URL and the region are the same.
    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        let at = (self.access_key_id.clone(), self.endpoint_url.clone(), self.region());
        let was = (stored.access_key_id.clone(), stored.endpoint_url.clone(), stored.region());
        super::aws::keep_secret_key(&mut self.secret_access_key, at, &stored.secret_access_key, was);
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        [
            http_dialled("queueUrl", &self.queue_url),
            self.endpoint_url.as_deref().and_then(|u| http_dialled("endpointUrl", u)),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
        send(self, at, out).await
    }
}

async fn send(cfg: &Sqs, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let s = setup(&cfg.access(), &cfg.region(), at.sender, at.bound, at.reached);
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
