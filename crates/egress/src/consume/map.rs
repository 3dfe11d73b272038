//! A broker message read as a message of the send API: which application,
//! event type, event id and channels it names (its headers, or an envelope
//! body), its payload, and the key that makes a redelivered copy find the
//! message the first made. What cannot be read is a poison message: the reason
//! says why, and it is set aside as a dead letter.

use hookgate_shared::{
    ids::{is_uid, AppId, BrokerSourceId, MessageId, Ref},
    store::messages::NewMessage,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::destinations::brokers::Received;

/// A broker message as a message to publish.
#[derive(Debug)]
pub struct Mapped {
    pub app: Ref<AppId>,
    pub new: NewMessage,
}

/// The body when no header names the event type: Svix's `MessageIn` shape.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    app_id: Option<String>,
    event_type: String,
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default)]
    channels: Option<Vec<String>>,
    payload: Box<serde_json::value::RawValue>,
}

fn header<'a>(r: &'a Received, name: &str) -> Option<&'a str> {
    r.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
}

/// Reads `r` for `source`, whose own application is `default_app`; payloads
/// at most `max_body` bytes.
pub fn map(
    r: &Received,
    source: &BrokerSourceId,
    default_app: Option<&AppId>,
    max_body: usize,
) -> Result<Mapped, String> {
    if r.body.len() > max_body {
        return Err(format!("the body is {} bytes, over the {max_body} a message may have", r.body.len()));
    }
    let named_type = header(r, "event-type").or_else(|| header(r, "type"));
    let (app, event_type, event_id, channels, payload) = match named_type {
        Some(t) => {
            let payload: Box<serde_json::value::RawValue> =
                serde_json::from_slice(&r.body).map_err(|e| format!("the body is not JSON: {e}"))?;
            let channels = header(r, "channels").map(|c| c.split(',').map(|s| s.trim().to_owned()).collect());
            (
                header(r, "app-id").map(str::to_owned),
                t.to_owned(),
                header(r, "event-id").map(str::to_owned),
                channels,
                payload,
            )
        }
        None => {
            let e: Envelope = serde_json::from_slice(&r.body).map_err(|e| {
                format!("no `event-type` header, and the body is not an envelope {{eventType, payload, …}}: {e}")
            })?;
            let app = e.app_id.or_else(|| header(r, "app-id").map(str::to_owned));
            let id = e.event_id.or_else(|| header(r, "event-id").map(str::to_owned));
            (app, e.event_type, id, e.channels, e.payload)
        }
    };
    if !is_uid(&event_type) {
        return Err(format!("the event type `{}` is not 1 to 256 of a-z A-Z 0-9 - _ .", cut(&event_type)));
    }
    if let Some(id) = &event_id {
        if !is_uid(id) {
            return Err(format!("the event id `{}` is not 1 to 256 of a-z A-Z 0-9 - _ .", cut(id)));
        }
    }
    if let Some(ch) = &channels {
        if ch.is_empty() || ch.len() > 5 || !ch.iter().all(|c| is_uid(c)) {
            return Err("`channels` must be 1 to 5 channel names".into());
        }
    }
    if !payload.get().trim_start().starts_with('{') {
        return Err("the payload must be a JSON object".into());
    }
    let app = match app {
        Some(a) => Ref::parse(&a).map_err(|e| format!("the application `{}`: {e}", cut(&a)))?,
        None => Ref::Id(default_app.cloned().ok_or("no application named, and the source has no `appId`")?),
    };
    // A copy delivered again finds the message the first made: by its event id,
    // else by the broker's id of it, else by its content.
    let key = match (&event_id, &r.broker_id) {
        (Some(id), _) => format!("event:{id}"),
        (None, Some(b)) => format!("broker:{b}"),
        (None, None) => {
            // The body and what names the event: two messages differing only in
            // their event type are two.
            let mut h = Sha256::new();
            h.update(&r.body);
            for name in ["event-type", "type", "app-id", "channels"] {
                h.update([0]);
                h.update(header(r, name).unwrap_or_default().as_bytes());
            }
            format!("sha256:{:x}", h.finalize())
        }
    };
    let new = NewMessage {
        id: MessageId::generate(),
        event_id,
        event_type,
        channels,
        tags: None,
        payload: payload.get().as_bytes().to_vec(),
        content_type: "application/json".into(),
        idempotency_key: None,
        request_key: Some(format!("{source}:{key}")),
        traceparent: None,
        payload_expires_at: None,
    };
    Ok(Mapped { app, new })
}

/// At most 64 characters of a value, for a reason (controls left out: a reason is stored as text).
fn cut(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destinations::brokers::Token;

    fn received(body: &str, headers: &[(&str, &str)], broker_id: Option<&str>) -> Received {
        Received {
            broker_id: broker_id.map(str::to_owned),
            body: body.as_bytes().to_vec(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            token: Token::Redis("1-0".into()),
        }
    }

    fn source() -> BrokerSourceId {
        BrokerSourceId::from_db("bsrc_01J0000000000000000000000A".into())
    }

    #[test]
    fn an_envelope_names_the_message_and_its_event_id_keys_it() {
        let r = received(
            r#"{"appId": "shop", "eventType": "order.paid", "eventId": "o-1", "channels": ["eu"], "payload": {"n": 1}}"#,
            &[],
            Some("m-9"),
        );
        let m = map(&r, &source(), None, 1 << 20).unwrap();
        assert_eq!(m.app.to_string(), "shop");
        assert_eq!((m.new.event_type.as_str(), m.new.event_id.as_deref()), ("order.paid", Some("o-1")));
        assert_eq!(m.new.channels, Some(vec!["eu".to_owned()]));
        assert_eq!(m.new.payload, br#"{"n": 1}"#);
        assert_eq!(m.new.request_key.as_deref(), Some("bsrc_01J0000000000000000000000A:event:o-1"));
    }

    #[test]
    fn headers_name_the_message_and_the_body_is_the_payload_keyed_by_the_brokers_id() {
        let app = AppId::from_db("app_1".into());
        let r = received(r#"{"amount": 5}"#, &[("event-type", "order.paid"), ("channels", "a, b")], Some("m-9"));
        let m = map(&r, &source(), Some(&app), 1 << 20).unwrap();
        assert_eq!(m.app.to_string(), "app_1");
        assert_eq!(m.new.channels, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(m.new.request_key.as_deref(), Some("bsrc_01J0000000000000000000000A:broker:m-9"));
        // Without a broker id, the same content is the same key.
        let once = map(&received(r#"{"amount": 5}"#, &[("event-type", "x")], None), &source(), Some(&app), 99).unwrap();
        let again =
            map(&received(r#"{"amount": 5}"#, &[("event-type", "x")], None), &source(), Some(&app), 99).unwrap();
        assert_eq!(once.new.request_key, again.new.request_key);
    }

    #[test]
    fn what_cannot_be_read_is_poison_with_its_reason() {
        let app = AppId::from_db("app_1".into());
        let cases = [
            (received("not json", &[("event-type", "x")], None), "not JSON"),
            (received(r#"{"payload": {}}"#, &[], None), "not an envelope"),
            (received(r#"{"eventType": "a b", "payload": {}}"#, &[], None), "event type"),
            (received(r#"[1]"#, &[("event-type", "x")], None), "JSON object"),
            (received(r#"{"eventType": "x", "payload": {}, "channels": []}"#, &[], None), "channels"),
        ];
        for (r, says) in cases {
            let e = map(&r, &source(), Some(&app), 1 << 20).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let e = map(&received(r#"{"eventType": "x", "payload": {}}"#, &[], None), &source(), None, 99).unwrap_err();
        assert!(e.contains("no application"), "{e}");
        let e =
            map(&received(r#"{"eventType": "x", "payload": {}}"#, &[], None), &source(), Some(&app), 10).unwrap_err();
        assert!(e.contains("over the 10"), "{e}");
    }
}
