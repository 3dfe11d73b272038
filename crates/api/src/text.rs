//! Text Postgres cannot store: a NUL (`\u0000`) anywhere in a JSON request body,
//! but inside a message's `payload` (kept as bytes), answers 422 naming the field
//! before any handler runs, so nothing is half-written and no batch is spoiled.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::{header::CONTENT_ENCODING, Method, StatusCode},
    middleware::Next,
    web, Error,
};
use hookgate_shared::{http::ApiError, AppState};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::{auth::reject, idempotency::read_body};

/// The only way JSON can spell a NUL: raw control characters are not valid JSON.
const ESCAPED_NUL: &[u8] = b"\\u0000";

pub async fn reject_nul(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if !matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    // The extractors would inflate a compressed body after this check has looked
    // at its compressed bytes: Hookgate's API takes bodies as sent.
    if let Some(enc) = req.headers().get(CONTENT_ENCODING).filter(|v| v.as_bytes() != b"identity") {
        let enc = String::from_utf8_lossy(enc.as_bytes()).into_owned();
        return reject(
            req,
            ApiError::Coded {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                code: "unsupported_content_encoding",
                detail: format!("`Content-Encoding: {enc}` is not accepted; send the body uncompressed"),
            },
        );
    }
    let limit = req.app_data::<web::Data<AppState>>().map_or(usize::MAX, |s| s.config.max_body);
    let body = match read_body(&mut req, limit).await {
        Ok(b) => b,
        Err(e) => return reject(req, e),
    };
    // The byte scan keeps the common case to one pass; only a hit walks the body,
    // building nothing of it: memory for the path to the current value and the
    // longest string, whatever the body holds.
    if body.windows(ESCAPED_NUL.len()).any(|w| w == ESCAPED_NUL) {
        let refusal = match nul_field(&body) {
            Ok(field) => {
                field.map(|field| format!("`{field}` contains a NUL character (\\u0000), which text cannot hold"))
            }
            // Where a NUL is, only a parse can tell; a body that will not parse
            // (a lone surrogate outside a payload, nesting past 128) is refused
            // rather than let by.
            Err(e) => Some(format!("the body contains `\\u0000` and cannot be checked: {e}")),
        };
        if let Some(why) = refusal {
            return reject(req, ApiError::Validation(why));
        }
    }
    req.set_payload(Payload::from(body));
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The first field (as `a.b[2].c`, in the body's order) whose name or text
/// holds a NUL, `(body)` for a body that is one string; `None` if none does. A
/// top-level `payload` is skipped, not read into (a message's payload is stored
/// and sent as bytes). An error if the body is not JSON as far as the first NUL.
///
/// The body is walked by a `serde_json` deserializer that builds no value: what
/// is held is the path to where it is (a segment per level, at most 128 levels)
/// and the string being read, so a body of small objects, about a hundred times
/// its size once parsed, costs a few KiB. The walk stops at the first NUL.
pub fn nul_field(body: &[u8]) -> Result<Option<String>, serde_json::Error> {
    let mut path = Vec::new();
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(body);
    let walked = Walk { path: &mut path, found: &mut found, top: true }.deserialize(&mut de).and_then(|()| de.end());
    match (found, walked) {
        (Some(field), _) => Ok(Some(field)),
        (None, Ok(())) => Ok(None),
        (None, Err(e)) => Err(e),
    }
}

/// One step of a path: a field's name, or an index into a list.
enum Segment {
    Key(String),
    Index(usize),
}

/// The path as `a.b[2].c` (a name with a NUL spelled `\u0000`).
fn spelled(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(k) if out.is_empty() => out.push_str(k),
            Segment::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Walks one value at `path`; on a NUL, writes its field to `found` and stops
/// the walk (with an error the caller tells apart by `found`).
struct Walk<'a> {
    path: &'a mut Vec<Segment>,
    found: &'a mut Option<String>,
    /// The body's own value: its `payload` field is skipped.
    top: bool,
}

impl Walk<'_> {
    fn inner(&mut self) -> Walk<'_> {
        Walk { path: self.path, found: self.found, top: false }
    }

    fn stop<E: de::Error>(&mut self, field: String) -> E {
        *self.found = Some(field);
        E::custom("a NUL character")
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(mut self, s: &str) -> Result<(), E> {
        if !s.contains('\0') {
            return Ok(());
        }
        let field = match self.path.is_empty() {
            true => "(body)".to_owned(),
            false => spelled(self.path),
        };
        Err(self.stop(field))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            self.path.push(Segment::Index(i));
            let more = seq.next_element_seed(self.inner())?;
            self.path.pop();
            if more.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key.contains('\0') {
                self.path.push(Segment::Key(key.replace('\0', "\\u0000")));
                let field = spelled(self.path);
                return Err(self.stop(field));
            }
            if self.top && key == "payload" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.path.push(Segment::Key(key));
            map.next_value_seed(self.inner())?;
            self.path.pop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::nul_field;
    use crate::counting::peak_of;
    use serde_json::json;

    /// A body of 1 MiB of small objects, `{"k":0}` (about 850 bytes each once
    /// parsed into a `serde_json::Value`), with one NUL at its end: the check
    /// finds the field within a few KiB, where parsing the body whole held
    /// about a hundred times the body.
    #[test]
    fn finding_the_nul_in_a_body_of_small_objects_holds_a_few_kib_not_a_hundred_times_the_body() {
        let objects = vec![r#"{"k":0}"#; (1 << 20) / 8].join(",");
        let body = format!(r#"{{"items":[{objects}],"name":"a\u0000b"}}"#);
        let (peak, found) = peak_of(|| nul_field(body.as_bytes()));
        assert_eq!(found.unwrap().as_deref(), Some("name"));
        assert!(peak < 64 << 10, "finding the NUL held {peak} bytes for a body of {} bytes", body.len());
        // The NUL deep in the list: its path is kept, nothing else.
        let body = format!(r#"{{"items":[{objects},{{"k":"\u0000"}}]}}"#);
        let (peak, found) = peak_of(|| nul_field(body.as_bytes()));
        assert_eq!(found.unwrap(), Some(format!("items[{}].k", (1 << 20) / 8)));
        assert!(peak < 64 << 10, "finding the NUL held {peak} bytes");
    }

    /// The field a NUL is in, for a body written as `v`.
    fn field(v: serde_json::Value) -> Option<String> {
        nul_field(v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn the_field_holding_a_nul_is_named_with_its_path() {
        assert_eq!(field(json!({"name": "a\u{0}b"})).as_deref(), Some("name"));
        assert_eq!(field(json!({"metadata": {"k": "a\u{0}"}})).as_deref(), Some("metadata.k"));
        assert_eq!(field(json!({"tags": ["ok", "a\u{0}"]})).as_deref(), Some("tags[1]"));
        assert_eq!(field(json!({"headers": {"a\u{0}": "v"}})).as_deref(), Some("headers.a\\u0000"));
        assert_eq!(field(json!("a\u{0}")).as_deref(), Some("(body)"));
        assert_eq!(field(json!([{"a": [1, {"b": "\u{0}"}]}])).as_deref(), Some("[0].a[1].b"));
        assert_eq!(field(json!({"a": [1, 2.5, true, null, "x"], "b": {}})), None);
        // The first in the body's order.
        assert_eq!(nul_field(br#"{"z":"\u0000","a":"\u0000"}"#).unwrap().as_deref(), Some("z"));
    }

    #[test]
    fn a_nul_inside_a_top_level_payload_is_allowed_but_not_deeper_payload_keys() {
        assert_eq!(field(json!({"payload": {"k": "a\u{0}b"}, "eventType": "x"})), None);
        assert_eq!(field(json!({"metadata": {"payload": "a\u{0}"}})).as_deref(), Some("metadata.payload"));
        assert_eq!(
            field(json!([{"payload": "a\u{0}"}])).as_deref(),
            Some("[0].payload"),
            "a list's item is not the body"
        );
        assert_eq!(field(json!({"payload": "x", "tags": ["\u{0}"]})).as_deref(), Some("tags[0]"));
    }

    #[test]
    fn a_body_that_is_not_json_as_far_as_its_first_nul_is_an_error_not_passed() {
        for body in [
            r#"{"name":"\udc00","tags":["\u0000"]}"#,
            r#"{"name":"\u0000"#,
            r#"{"tags":["ok"] "x":"\u0000"}"#,
            r#"{"a":1} "\u0000""#,
        ] {
            assert!(nul_field(body.as_bytes()).is_err(), "{body}");
        }
        let deep = format!("{}\"\\u0000\"{}", "[".repeat(200), "]".repeat(200));
        assert!(nul_field(deep.as_bytes()).is_err(), "nesting past 128 is refused, as a parse would");
        // Inside a top-level payload a lone surrogate is bytes like any other
        // (the handler takes it): a NUL elsewhere is still found.
        let body = r#"{"eventType":"a.b","payload":{"x":"\udc00"},"tags":["a\u0000"]}"#;
        assert_eq!(nul_field(body.as_bytes()).unwrap().as_deref(), Some("tags[0]"));
    }
}
