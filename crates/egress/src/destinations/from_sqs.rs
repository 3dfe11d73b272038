//! The `sqs` broker source: a queue read with long polls through Hookgate's
//! guarded HTTP client; a message is deleted only after the message it makes
//! is committed, and one not deleted comes back after its visibility timeout.

use std::time::Duration;

use serde_json::Value;

use super::{
    aws::{aws_config, sdk_client, setup},
    brokers::{Reach, Received, Token},
    kind::{http_dialled, invalid, Invalid},
    Dial, Reached,
};
use crate::ssrf::Guard;

aws_config! {
    /// `sqs`: a queue read with long polls (`queueUrl`); a message is deleted
    /// once the message it makes is committed.
    pub struct SqsSource {
        pub queue_url: String,
        /// Seconds a read message stays hidden from other reads before it comes
        /// back if not deleted, 10 to 43200 (60).
        #[serde(default = "visibility")]
        pub visibility_timeout: i32,
    }
    region implied by |c| super::aws::region_in_queue_url(&c.queue_url);
}

fn visibility() -> i32 {
    60
}

/// One request's bound: a long poll waits at most 5 s of it.
const REQUEST_BOUND: Duration = Duration::from_secs(15);

impl SqsSource {
    pub fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        super::kind::check_http_url(guard, &self.queue_url, "queueUrl")?;
        if !(10..=43_200).contains(&self.visibility_timeout) {
            return Err(invalid("`visibilityTimeout` must be 10 to 43200 seconds"));
        }
        self.check_aws(guard)
    }

    pub fn shown(&self) -> Value {
        self.shown_aws()
    }

    pub fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.keep_aws(stored);
        Ok(())
    }

    pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        [
            http_dialled("queueUrl", &self.queue_url),
            self.endpoint_url.as_deref().and_then(|u| http_dialled("endpointUrl", u)),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// An SQS client for one queue.
pub struct SqsConsumer {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    visibility: i32,
}

impl SqsConsumer {
    pub(crate) async fn connect(cfg: &SqsSource, _: &Dial<'_>, at: &Reach<'_>, _tag: &str) -> Result<Self, String> {
        let reached = Reached::default();
        let client = sdk_client!(aws_sdk_sqs, setup(&cfg.access(), &cfg.region(), at.sender, REQUEST_BOUND, &reached));
        Ok(SqsConsumer { client, queue_url: cfg.queue_url.clone(), visibility: cfg.visibility_timeout })
    }

    pub async fn receive(&mut self, max: usize, wait: Duration) -> Result<Vec<Received>, String> {
        let got = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(wait.as_secs().clamp(0, 5) as i32)
            .visibility_timeout(self.visibility)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| super::aws::failure("SQS", e).text)?;
        Ok(got
            .messages()
            .iter()
            .filter_map(|m| {
                let handle = m.receipt_handle()?.to_owned();
                let mut headers: Vec<(String, String)> = m
                    .message_attributes()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), v.string_value()?.to_owned())))
                    .collect();
                // In one order every time: which of two names differing in case wins stays the same.
                headers.sort();
                Some(Received {
                    broker_id: m.message_id().map(str::to_owned),
                    body: m.body().unwrap_or_default().as_bytes().to_vec(),
                    headers,
                    token: Token::Sqs(handle),
                })
            })
            .collect())
    }

    pub async fn ack(&mut self, token: &Token) -> Result<(), String> {
        let Token::Sqs(handle) = token else { return Err("not an SQS message".into()) };
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(handle)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| super::aws::failure("SQS", e).text)
    }

    /// Keeps a message held by this consumer hidden for a while more (at most
    /// five minutes a time: SQS refuses more than twelve hours from its receipt).
    pub async fn keep(&mut self, token: &Token) -> Result<(), String> {
        self.hide_for(token, self.visibility.min(300)).await
    }

    /// Makes the message visible again now, rather than after its timeout.
    pub async fn release(&mut self, token: &Token) -> Result<(), String> {
        self.hide_for(token, 0).await
    }

    /// Sets how long from now the message stays hidden from other reads.
    async fn hide_for(&self, token: &Token, secs: i32) -> Result<(), String> {
        let Token::Sqs(handle) = token else { return Err("not an SQS message".into()) };
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(handle)
            .visibility_timeout(secs)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| super::aws::failure("SQS", e).text)
    }
}
