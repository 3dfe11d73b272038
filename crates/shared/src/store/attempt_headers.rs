//! An attempt's recorded request headers, stored without what its row already says.
//!
//! Every delivery carries the same eight headers: the message id three times
//! (`svix-id`, `webhook-id`, `idempotency-key`), its timestamp and signature
//! twice each (the `svix-*` and `webhook-*` names), and `content-type`. Written
//! out as a JSON object they were 415 of an attempt row's ~700 bytes, and the
//! attempt row is the largest a message writes. The compact form keeps the
//! headers that differ, and for the usual ones a bit each saying they were sent
//! with the value the row implies: the message id is the row's own, the
//! timestamp and signature are kept once (`:t`, `:s`), the content type is
//! `application/json`. Reading it gives back exactly the object recorded.
//!
//! The keys of the compact form begin with `:`, which no header name can hold
//! (it is not a token character), so it is told from the full form, which
//! attempts recorded before it (and by the previous release) keep.
//!
//! The previous release reads only the full form, so the compact one is written
//! once the contract `0048_compact_attempt_headers` has run, that is once no
//! process of that release is left. The writers pass both forms and the
//! statement picks ([`COMPACT`]): a look at the migrations table once per
//! statement, no round trip of its own and nothing cached in the process (which
//! may talk to more than one database, as the tests do).

use serde_json::{Map, Value};

/// SQL: whether a statement stores the compact form (the contract has run).
pub(super) const COMPACT: &str =
    "EXISTS (SELECT 1 FROM hookgate_migrations WHERE version = '0048_compact_attempt_headers')";

/// The marker of the compact form: which of [`USUAL`] were sent as implied.
const SENT: &str = ":n";
/// The timestamp headers' value, kept once.
const STAMP: &str = ":t";
/// The signature headers' value, kept once.
const SIGNATURE: &str = ":s";

/// What a usual header's value is implied by.
#[derive(Clone, Copy, PartialEq)]
enum Implied {
    MessageId,
    Stamp,
    Signature,
    Json,
}

/// The usual headers, each a bit of [`SENT`] by its place here. Append only:
/// stored rows name them by position.
const USUAL: [(&str, Implied); 8] = [
    ("svix-id", Implied::MessageId),
    ("webhook-id", Implied::MessageId),
    ("idempotency-key", Implied::MessageId),
    ("svix-timestamp", Implied::Stamp),
    ("webhook-timestamp", Implied::Stamp),
    ("svix-signature", Implied::Signature),
    ("webhook-signature", Implied::Signature),
    ("content-type", Implied::Json),
];

/// The recorded headers (`recorded`, a JSON object's text) in the compact form,
/// for an attempt of message `msg_id` (`None`: a request that carried several,
/// such as a FIFO batch); as they are when they are not an object.
pub(super) fn compact_text(recorded: &str, msg_id: Option<&str>) -> String {
    match serde_json::from_str::<Value>(recorded) {
        Ok(Value::Object(map)) => Value::Object(compact(map, msg_id)).to_string(),
        _ => recorded.to_owned(),
    }
}

fn compact(mut map: Map<String, Value>, msg_id: Option<&str>) -> Map<String, Value> {
    if map.is_empty() || map.keys().any(|k| k.starts_with(':')) {
        return map; // nothing to spare, or not headers: kept as they are
    }
    let (mut sent, mut stamp, mut signature) = (0u64, None::<String>, None::<String>);
    for (bit, (name, implied)) in USUAL.iter().enumerate() {
        let Some(Value::String(value)) = map.get(*name) else { continue };
        let as_implied = match implied {
            Implied::MessageId => msg_id == Some(value.as_str()),
            Implied::Json => value == "application/json",
            Implied::Stamp => stamp.get_or_insert_with(|| value.clone()) == value,
            Implied::Signature => signature.get_or_insert_with(|| value.clone()) == value,
        };
        if as_implied {
            sent |= 1 << bit;
            map.remove(*name);
        }
    }
    map.insert(SENT.into(), sent.into());
    if let Some(t) = stamp {
        map.insert(STAMP.into(), t.into());
    }
    if let Some(s) = signature {
        map.insert(SIGNATURE.into(), s.into());
    }
    map
}

/// The headers an attempt of message `msg_id` recorded, from what was stored
/// (either form). Also for the cold archive, which keeps the full form.
pub(crate) fn read(stored: Value, msg_id: &str) -> Value {
    let Value::Object(mut map) = stored else { return stored };
    let Some(sent) = map.remove(SENT).and_then(|n| n.as_u64()) else { return Value::Object(map) };
    let stamp = map.remove(STAMP);
    let signature = map.remove(SIGNATURE);
    for (bit, (name, implied)) in USUAL.iter().enumerate() {
        if sent & (1 << bit) == 0 {
            continue;
        }
        let value = match implied {
            Implied::MessageId => Value::String(msg_id.to_owned()),
            Implied::Json => Value::String("application/json".into()),
            Implied::Stamp => stamp.clone().unwrap_or(Value::Null),
            Implied::Signature => signature.clone().unwrap_or(Value::Null),
        };
        map.insert((*name).to_owned(), value);
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSG: &str = "msg_01M98QAA3EWSRDTH4E03JGCE9Z";

    fn usual() -> Value {
        serde_json::json!({
            "svix-id": MSG, "webhook-id": MSG, "idempotency-key": MSG,
            "content-type": "application/json",
            "svix-signature": "v1,7y5ncQQmuqz5a3/+lNmC17yJPPF44NLXozll/rcLrVo=",
            "webhook-signature": "v1,7y5ncQQmuqz5a3/+lNmC17yJPPF44NLXozll/rcLrVo=",
            "svix-timestamp": "1796662962", "webhook-timestamp": "1796662962",
        })
    }

    fn round_trip(headers: &Value, msg_id: Option<&str>) -> (String, Value) {
        let stored = compact_text(&headers.to_string(), msg_id);
        let back = read(serde_json::from_str(&stored).unwrap(), msg_id.unwrap_or(MSG));
        (stored, back)
    }

    #[test]
    fn a_usual_deliverys_headers_are_stored_in_a_quarter_of_the_space_and_read_back_the_same() {
        let (stored, back) = round_trip(&usual(), Some(MSG));
        assert_eq!(back, usual());
        assert!(stored.len() * 4 < usual().to_string().len(), "{} bytes: {stored}", stored.len());
        assert!(!stored.contains(MSG), "{stored}");
    }

    #[test]
    fn headers_that_differ_from_what_the_row_implies_are_kept_as_sent() {
        let mut h = usual();
        h["webhook-id"] = "msg_other".into();
        h["webhook-signature"] = "v1,other v1a,more".into();
        h["content-type"] = "text/plain".into();
        h["x-custom"] = "[redacted]".into();
        let (stored, back) = round_trip(&h, Some(MSG));
        assert_eq!(back, h);
        for kept in ["msg_other", "v1,other v1a,more", "text/plain", "x-custom"] {
            assert!(stored.contains(kept), "{kept} missing from {stored}");
        }
    }

    #[test]
    fn a_request_of_several_messages_keeps_its_ids_and_reads_back_the_same() {
        let (stored, back) = round_trip(&usual(), None);
        assert_eq!(back, usual());
        assert!(stored.contains(MSG), "{stored}");
    }

    #[test]
    fn only_some_usual_headers_sent_read_back_as_only_those() {
        let h = serde_json::json!({"webhook-id": MSG, "webhook-timestamp": "17", "webhook-signature": "v1,a"});
        assert_eq!(round_trip(&h, Some(MSG)).1, h);
        let empty = serde_json::json!({});
        assert_eq!(round_trip(&empty, Some(MSG)).1, empty);
    }

    proptest::proptest! {
        #[test]
        fn any_headers_read_back_as_recorded(
            names in proptest::collection::vec(proptest::sample::select(
                vec!["svix-id", "webhook-id", "idempotency-key", "svix-timestamp", "webhook-timestamp",
                     "svix-signature", "webhook-signature", "content-type", "x-other"]), 0..9),
            values in proptest::collection::vec(proptest::sample::select(
                vec![MSG, "msg_b", "17", "18", "v1,a", "v1,b", "application/json", "text/plain"]), 9),
            several in proptest::bool::ANY,
        ) {
            let h: Map<String, Value> =
                names.iter().zip(&values).map(|(n, v)| ((*n).to_owned(), Value::String((*v).to_owned()))).collect();
            let h = Value::Object(h);
            let (_, back) = round_trip(&h, (!several).then_some(MSG));
            proptest::prop_assert_eq!(back, h);
        }
    }

    #[test]
    fn the_full_form_and_what_is_not_an_object_read_as_stored() {
        assert_eq!(read(usual(), MSG), usual());
        assert_eq!(read(Value::Null, MSG), Value::Null);
        assert_eq!(compact_text("not json", Some(MSG)), "not json");
        assert_eq!(compact_text("{}", Some(MSG)), "{}");
    }
}
