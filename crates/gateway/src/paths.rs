//! Paths and queries as Svix serves them: a trailing slash and doubled slashes do
//! not change the route (`/api/v1/app/{app}/msg/` is `/api/v1/app/{app}/msg`), and
//! a list given as a repeated key (`event_types=a&event_types=b`, what clients
//! generated from Svix's OpenAPI send for an array) reads as the comma-separated
//! one the official SDKs send (`event_types=a,b`).
//!
//! Hand-written rather than actix's `NormalizePath` because that one runs a
//! regular expression (`//+`, in `regex-lite`'s backtracking-free but slow
//! engine) over every request's path; this looks at the bytes and rewrites only
//! a path that needs it.

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::uri::{PathAndQuery, Uri},
    middleware::Next,
    Error,
};

/// Where the API document's page lives (crates/gateway/src/openapi.rs): static
/// files under a directory, whose relative links need the slash, so left as sent.
pub const PAGE: &str = "/docs/";

/// The path with runs of `/` made one and a trailing `/` dropped (but for `/`
/// itself), or `None` when it is already so.
pub fn normalized(path: &str) -> Option<String> {
    if path.starts_with(PAGE) {
        return None;
    }
    let doubled = path.as_bytes().windows(2).any(|w| w == b"//");
    let trailing = path.len() > 1 && path.ends_with('/');
    if !doubled && !trailing {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    if out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    Some(out)
}

/// The query with every repeated key's values joined by commas into one, in the
/// order the keys first came, and a key written as an array (`event_types[]`, as
/// Svix's own tests and PHP-style clients send it) read as the bare key; `None`
/// when no key repeats or is so written (the query is left as sent).
pub fn merged_query(query: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let mut bracketed = false;
    let mut merged: Vec<(String, String)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        let k = match k.strip_suffix("[]") {
            Some(bare) => {
                bracketed = true;
                bare.to_owned()
            }
            None => k,
        };
        match merged.iter_mut().find(|(mk, _)| *mk == k) {
            Some((_, mv)) => {
                mv.push(',');
                mv.push_str(&v);
            }
            None => merged.push((k, v)),
        }
    }
    let repeated = merged.len() < url::form_urlencoded::parse(query.as_bytes()).count();
    (repeated || bracketed).then(|| url::form_urlencoded::Serializer::new(String::new()).extend_pairs(merged).finish())
}

/// Rewrites the request's path and query before routing, where they need it.
pub async fn normalize(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let query = Some(req.query_string())
        .filter(|q| q.contains('&') || q.contains("[]") || q.contains("%5B%5D") || q.contains("%5b%5d"))
        .and_then(merged_query);
    let path = normalized(req.path());
    if path.is_some() || query.is_some() {
        let path = path.unwrap_or_else(|| req.path().to_owned());
        let mut parts = req.head().uri.clone().into_parts();
        let with_query = match query.as_deref().or(parts.path_and_query.as_ref().and_then(PathAndQuery::query)) {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        // What was a valid path and query stays one with fewer slashes; should it
        // not, the request goes on as sent.
        if let Ok(pq) = PathAndQuery::try_from(with_query) {
            parts.path_and_query = Some(pq);
            if let Ok(uri) = Uri::from_parts(parts) {
                req.match_info_mut().get_mut().update(&uri);
                req.head_mut().uri = uri;
            }
        }
    }
    next.call(req).await
}

#[cfg(test)]
mod tests {
    use super::{merged_query, normalized};

    #[test]
    fn a_repeated_query_key_reads_as_one_comma_separated_list_and_a_query_without_one_is_left_alone() {
        assert_eq!(
            merged_query("event_types=a.b&limit=5&event_types=c&channel=x").as_deref(),
            Some("event_types=a.b%2Cc&limit=5&channel=x")
        );
        assert_eq!(merged_query("event_types=a,b&limit=5"), None);
        assert_eq!(
            merged_query("event_types[]=a.b").as_deref(),
            Some("event_types=a.b"),
            "an array key is the bare key"
        );
        assert_eq!(
            merged_query("event_types%5B%5D=a&event_types%5B%5D=c&limit=2").as_deref(),
            Some("event_types=a%2Cc&limit=2")
        );
        assert_eq!(merged_query(""), None);
    }

    #[test]
    fn a_trailing_slash_and_doubled_slashes_are_dropped_and_a_clean_path_is_left_alone() {
        assert_eq!(normalized("/api/v1/app/a/msg/").as_deref(), Some("/api/v1/app/a/msg"));
        assert_eq!(normalized("/api//v1///app/a/msg").as_deref(), Some("/api/v1/app/a/msg"));
        assert_eq!(normalized("//").as_deref(), Some("/"));
        assert_eq!(normalized("/docs/"), None, "the document's page keeps its directory's slash");
        assert_eq!(normalized("/"), None);
        assert_eq!(normalized("/api/v1/app/a/msg"), None);
        assert_eq!(normalized(""), None);
    }
}
