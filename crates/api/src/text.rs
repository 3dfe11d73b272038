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
use serde_json::Value;

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
    // The byte scan keeps the common case to one pass; only a hit parses the body.
    if body.windows(ESCAPED_NUL.len()).any(|w| w == ESCAPED_NUL) {
        let refusal = match serde_json::from_slice::<Value>(&body) {
            Ok(v) => nul_field(&v)
                .map(|field| format!("`{field}` contains a NUL character (\\u0000), which text cannot hold")),
            // Where a NUL is, only a parse can tell; a body that will not parse
            // (a lone surrogate, nesting past 128) is refused rather than let by.
            Err(e) => Some(format!("the body contains `\\u0000` and cannot be checked: {e}")),
        };
        if let Some(why) = refusal {
            return reject(req, ApiError::Validation(why));
        }
    }
    req.set_payload(Payload::from(body));
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The first field (as `a.b[2].c`) whose name or text holds a NUL; a top-level
/// `payload` is skipped, because a message's payload is stored and sent as bytes.
pub fn nul_field(v: &Value) -> Option<String> {
    fn walk(v: &Value, at: &str, top: bool) -> Option<String> {
        let here = |s: &str| if at.is_empty() { s.to_owned() } else { format!("{at}.{s}") };
        match v {
            Value::String(s) if s.contains('\0') => {
                Some(if at.is_empty() { "(body)".to_owned() } else { at.to_owned() })
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| walk(x, &format!("{at}[{i}]"), false)),
            Value::Object(map) => map.iter().find_map(|(k, x)| {
                if k.contains('\0') {
                    return Some(here(&k.replace('\0', "\\u0000")));
                }
                if top && k == "payload" {
                    return None;
                }
                walk(x, &here(k), false)
            }),
            _ => None,
        }
    }
    walk(v, "", true)
}

#[cfg(test)]
mod tests {
    use super::nul_field;
    use serde_json::json;

    #[test]
    fn the_field_holding_a_nul_is_named_with_its_path() {
        assert_eq!(nul_field(&json!({"name": "a\u{0}b"})).as_deref(), Some("name"));
        assert_eq!(nul_field(&json!({"metadata": {"k": "a\u{0}"}})).as_deref(), Some("metadata.k"));
        assert_eq!(nul_field(&json!({"tags": ["ok", "a\u{0}"]})).as_deref(), Some("tags[1]"));
        assert_eq!(nul_field(&json!({"headers": {"a\u{0}": "v"}})).as_deref(), Some("headers.a\\u0000"));
    }

    #[test]
    fn a_nul_inside_a_top_level_payload_is_allowed_but_not_deeper_payload_keys() {
        assert_eq!(nul_field(&json!({"payload": {"k": "a\u{0}b"}, "eventType": "x"})), None);
        assert_eq!(nul_field(&json!({"metadata": {"payload": "a\u{0}"}})).as_deref(), Some("metadata.payload"));
    }
}
