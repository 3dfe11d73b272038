//! The `sqs` destination: one SQS message per message, through the AWS SDK.

use hookgate_shared::status::EndpointKind;
use serde_json::Value;

use super::{
    aws::{attributes, aws_config, failure, sdk_client, setup, text_body},
    kind::{http_dialled, Invalid, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

aws_config! {
    /// `sqs`: one SQS message per message (`queueUrl`; a `.fifo` queue keeps the
    /// application's order and dedupes by message id).
    pub struct Sqs {
        pub queue_url: String,
    }
    region implied by |c| super::aws::region_in_queue_url(&c.queue_url);
}

impl Kind for Sqs {
    const KIND: EndpointKind = EndpointKind::Sqs;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        super::kind::check_http_url(guard, &self.queue_url, "queueUrl")?;
        self.check_aws(guard)
    }

    fn locator(&self) -> String {
        super::kind::without_password(&self.queue_url, false)
    }

    fn shown(&self, _names_only: bool) -> Value {
        self.shown_aws()
    }

    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.keep_aws(stored);
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
    let client = sdk_client!(aws_sdk_sqs, setup(&cfg.access(), &cfg.region(), at.sender, at.bound, at.reached));
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
