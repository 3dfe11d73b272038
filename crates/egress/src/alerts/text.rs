//! What an alert says: a subject and a plain-text body built from what was
//! recorded when it was raised, and the chat message (Slack's incoming-webhook
//! shape, `{"text": …}`) with the tenant's names escaped so they cannot mention
//! a channel or make a link.

use hookgate_shared::store::{alert_outbox::Queued, alerts::Condition};
use serde_json::Value;

/// A subject line and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub subject: String,
    pub body: String,
}

/// A field of the detail as one line of text: controls removed, at most 200 characters.
fn field(d: &Value, key: &str) -> Option<String> {
    let v = d.get(key)?;
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    };
    Some(s.chars().filter(|c| !c.is_control() && !invisible(*c)).take(200).collect())
}

/// Format characters that reorder or hide text (bidirectional overrides,
/// zero-width marks): a name could make a subject read otherwise than it is.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The alert `q` as told to a person; `operator`: the reader sees every tenant's.
pub fn render(q: &Queued, operator: bool) -> Told {
    let d = &q.detail;
    let endpoint = field(d, "url").or_else(|| field(d, "endpointId")).unwrap_or_else(|| "an endpoint".into());
    let app = field(d, "appName").or_else(|| field(d, "appUid")).unwrap_or_else(|| "an application".into());
    let since = field(d, "failingSince");
    let (subject, first) = match q.condition {
        Condition::EndpointDisabled => (
            format!("Endpoint disabled: {endpoint}"),
            format!(
                "The endpoint {endpoint} of {app} was disabled after failing{}. Nothing more is sent to it until \
                 it is enabled again.",
                since.as_ref().map(|s| format!(" since {s}")).unwrap_or_default()
            ),
        ),
        Condition::EndpointFailing => (
            format!("Endpoint failing: {endpoint}"),
            format!(
                "The endpoint {endpoint} of {app} has failed every attempt{}. Messages wait and are retried.",
                since.as_ref().map(|s| format!(" since {s}")).unwrap_or_default()
            ),
        ),
        Condition::AttemptExhausted => (
            format!("Message not delivered: {endpoint}"),
            format!(
                "A message{} to the endpoint {endpoint} of {app} failed its last attempt{}; it will not be retried \
                 unless it is resent.",
                field(d, "msgId").map(|m| format!(" ({m})")).unwrap_or_default(),
                field(d, "responseStatusCode").map(|c| format!(" (status {c})")).unwrap_or_default()
            ),
        ),
        Condition::SourceStalled => {
            let name = field(d, "sourceName").unwrap_or_else(|| "a broker source".into());
            (
                format!("Broker source stalled: {name}"),
                format!(
                    "The broker source {name} ({}) has read nothing since {}: {}. Its messages wait on the broker.",
                    field(d, "sourceType").unwrap_or_default(),
                    field(d, "since").unwrap_or_else(|| "it was made".into()),
                    field(d, "lastError").unwrap_or_else(|| "an error".into())
                ),
            )
        }
    };
    let mut body = first;
    if q.held > 0 {
        body.push_str(&format!("\n\n{} more like this since the last alert were not told one by one.", q.held));
    }
    body.push_str("\n\n");
    let mut line = |k: &str, label: &str| {
        if let Some(v) = field(d, k) {
            body.push_str(&format!("{label}: {v}\n"));
        }
    };
    if operator {
        line("tenantId", "Tenant");
    }
    line("sourceId", "Broker source");
    line("appId", "Application");
    line("appUid", "Application uid");
    line("endpointId", "Endpoint");
    line("endpointUid", "Endpoint uid");
    line("failingSince", "Failing since");
    body.push_str(&format!("Condition: {}\n", q.condition.as_str()));
    Told { subject: format!("[Hookgate] {subject}"), body }
}

/// The chat message: Slack's `{"text": …}`, with `&`, `<` and `>` escaped as
/// Slack asks, so no name can become `<!channel>` or a Slack link; an `@` is
/// followed by a zero-width space and `[`, `]` become `(`, `)`, so no name
/// mentions `@channel` or `@everyone`, or makes a Markdown link, where the
/// receiver (Mattermost, Rocket.Chat, Discord) reads them.
pub fn chat(t: &Told) -> Vec<u8> {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('@', "@\u{200B}")
            .replace('[', "(")
            .replace(']', ")")
    };
    let subject = t.subject.strip_prefix("[Hookgate] ").unwrap_or(&t.subject);
    let text = format!("*[Hookgate] {}*\n{}", esc(subject), esc(t.body.trim_end()));
    serde_json::to_vec(&serde_json::json!({ "text": text })).expect("a JSON object serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookgate_shared::{ids::TenantId, store::alerts::Target};

    fn queued(condition: Condition, held: i32, detail: Value) -> Queued {
        Queued {
            id: 1,
            tenant: TenantId::from_db("tnt_1".into()),
            target: Target::TenantChat,
            condition,
            app: None,
            detail,
            held,
            attempts: 1,
        }
    }

    #[test]
    fn a_disabled_endpoint_is_named_with_its_application_and_what_was_held_is_counted() {
        let q = queued(
            Condition::EndpointDisabled,
            3,
            serde_json::json!({"url": "https://a.example/x", "appName": "Shop", "appId": "app_1", "tenantId": "tnt_1"}),
        );
        let t = render(&q, false);
        assert_eq!(t.subject, "[Hookgate] Endpoint disabled: https://a.example/x");
        assert!(t.body.starts_with("The endpoint https://a.example/x of Shop was disabled"), "{}", t.body);
        assert!(t.body.contains("3 more like this"), "{}", t.body);
        assert!(!t.body.contains("Tenant:"), "a tenant's reader is not told its own id");
        assert!(render(&q, true).body.contains("Tenant: tnt_1"));
    }

    #[test]
    fn a_tenants_names_cannot_break_the_subject_line_nor_mention_a_chat_channel() {
        let q = queued(
            Condition::AttemptExhausted,
            0,
            serde_json::json!({"url": "https://a.example/\r\nBcc: x@y.z", "appName": "<!channel> & <https://evil|click>"}),
        );
        let t = render(&q, false);
        assert!(!t.subject.contains('\n') && !t.subject.contains('\r'), "{:?}", t.subject);
        let text: Value = serde_json::from_slice(&chat(&t)).unwrap();
        let text = text["text"].as_str().unwrap();
        assert!(!text.contains("<!channel>") && !text.contains("<https://"), "{text}");
        assert!(text.contains("&lt;!channel&gt; &amp; &lt;https://evil|click&gt;"), "{text}");
        let q = queued(
            Condition::EndpointFailing,
            0,
            serde_json::json!({"appName": "@everyone [win](https://x.example) \u{202E}gpj"}),
        );
        let text: Value = serde_json::from_slice(&chat(&render(&q, false))).unwrap();
        let text = text["text"].as_str().unwrap();
        assert!(!text.contains("@everyone") && !text.contains("[win]") && !text.contains('\u{202E}'), "{text}");
    }
}
