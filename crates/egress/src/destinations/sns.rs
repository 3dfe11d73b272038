//! The `sns` destination: one SNS publish per message to a topic, through the AWS SDK.

use hookgate_shared::status::EndpointKind;
use serde_json::Value;

use super::{
    aws::{attributes, aws_config, failure, sdk_client, setup, text_body},
    kind::{http_dialled, invalid, Invalid, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

aws_config! {
    /// `sns`: one SNS publish per message to `topicArn`.
    pub struct Sns {
        pub topic_arn: String,
    }
    region implied by |c| super::aws::region_in_arn(&c.topic_arn);
}

impl Kind for Sns {
    const KIND: EndpointKind = EndpointKind::Sns;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        if !self.topic_arn.starts_with("arn:") {
            return Err(invalid("`topicArn` must be an ARN (`arn:aws:sns:region:account:name`)"));
        }
        self.check_aws(guard)
    }

    fn locator(&self) -> String {
        self.topic_arn.clone()
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
        send(self, at, out).await
    }
}

async fn send(cfg: &Sns, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
    use aws_sdk_sns::types::MessageAttributeValue;
    let client = sdk_client!(aws_sdk_sns, setup(&cfg.access(), &cfg.region(), at.sender, at.bound, at.reached));
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
