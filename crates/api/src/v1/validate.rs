//! Field checks shared by the API's resources, with messages naming the field.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use hookgate_shared::http::ApiError;
use serde::Deserialize;

/// Svix's `uid` pattern: 1 to 256 of `a-zA-Z0-9-_.`.
pub fn uid(field: &str, value: &str) -> Result<(), ApiError> {
    // The same rule that paths are parsed by, so every stored uid stays reachable.
    if !hookgate_shared::ids::is_uid(value) {
        return Err(ApiError::Validation(format!("`{field}` must be 1 to 256 of a-z A-Z 0-9 - _ .")));
    }
    Ok(())
}

/// An application created alongside a request (`application` in a message's or
/// a portal token's body) when its path names none: its `uid` must be given and
/// be the path's, as Svix requires, so the request cannot make an application the
/// next request with the same path would not find.
pub fn inline_uid(path: &str, uid: Option<&str>) -> Result<(), ApiError> {
    match uid {
        None => Err(ApiError::Validation("`application.uid` must be set to create the application".into())),
        Some(uid) if uid != path => {
            Err(ApiError::Validation("`application.uid` must be the application uid in the path".into()))
        }
        Some(_) => Ok(()),
    }
}

pub fn name(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > 256 {
        return Err(ApiError::Validation(format!("`{field}` must be 1 to 256 characters")));
    }
    Ok(())
}

/// A message's `channels`: 1 to 5 uids, or none.
pub fn channels(ch: &[String]) -> Result<(), ApiError> {
    if ch.is_empty() || ch.len() > 5 {
        return Err(ApiError::Validation("`channels` must hold 1 to 5 items, or be null".into()));
    }
    ch.iter().try_for_each(|c| uid("channels", c))
}

/// `throttleRate` (or the deprecated `rateLimit`): a positive uint16.
pub fn throttle_rate(value: Option<i64>) -> Result<Option<i32>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) if (1..=u16::MAX as i64).contains(&v) => Ok(Some(v as i32)),
        Some(_) => Err(ApiError::Validation("`throttleRate` must be between 1 and 65535".into())),
    }
}

/// `filter`: a content filter, parsed and compiled (`hookgate_shared::filter`);
/// a 422 says what is wrong with it and where. Empty or absent: none.
pub fn filter(text: Option<&str>) -> Result<Option<hookgate_shared::filter::Filter>, ApiError> {
    match text {
        None => Ok(None),
        Some(text) if text.trim().is_empty() => Ok(None),
        Some(text) => hookgate_shared::filter::Filter::parse(text)
            .map(Some)
            .map_err(|e| ApiError::Validation(format!("`filter` {e}"))),
    }
}

/// Maps a unique-key conflict to the words Svix uses.
pub fn conflict(what: &'static str) -> impl Fn(ApiError) -> ApiError {
    move |e| match e {
        ApiError::Conflict(_) => ApiError::Conflict(format!("{what} already exists")),
        other => other,
    }
}

/// The body of a secret rotation (an endpoint's or a source's): the new key, or
/// one generated, and how long the old one stays valid.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = EndpointSecretRotateIn)]
pub struct RotateIn {
    pub key: Option<String>,
    grace_period_seconds: Option<i64>,
}

impl RotateIn {
    /// Until when the old secret stays valid: 24 h by default, at most 7 days.
    pub fn old_secret_until(&self) -> Result<DateTime<Utc>, ApiError> {
        let grace = self.grace_period_seconds.unwrap_or(86_400);
        if !(0..=604_800).contains(&grace) {
            return Err(ApiError::Validation("`gracePeriodSeconds` must be between 0 and 604800".into()));
        }
        Ok(Utc::now() + Duration::seconds(grace))
    }
}

/// Prefixes no custom header may have, as Svix refuses them: its own headers,
/// and those a load balancer in front of a receiver (AWS's) sets.
const RESERVED_PREFIXES: &[&str] = &["svix-", "x-svix-", "x-amzn-"];

/// Header names Hookgate sets itself; an endpoint may not override them.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "user-agent",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    // The operator's proxy authenticates Hookgate, not a tenant.
    "proxy-authorization",
    "proxy-connection",
];

/// Custom headers an endpoint may have, and the longest value one may hold.
pub(crate) const MAX_HEADERS: usize = 50;
const MAX_HEADER_VALUE: usize = 4096;

/// Custom headers as a PATCH gives them (`None`: remove that one), checked:
/// count, names, values, and none Hookgate sets itself.
pub fn headers(headers: &HashMap<String, Option<String>>) -> Result<(), ApiError> {
    if headers.len() > MAX_HEADERS {
        return Err(ApiError::Validation(format!("at most {MAX_HEADERS} custom headers per endpoint")));
    }
    for (name, value) in headers {
        if value.as_ref().is_some_and(|v| v.len() > MAX_HEADER_VALUE) {
            return Err(ApiError::Validation(format!(
                "the value of header `{name}` is longer than {MAX_HEADER_VALUE} bytes"
            )));
        }
        let lower = name.to_ascii_lowercase();
        if actix_web::http::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ApiError::Validation(format!("header name `{name}` is not valid")));
        }
        if RESERVED.contains(&lower.as_str()) {
            return Err(ApiError::Validation(format!("header `{name}` is set by Hookgate and cannot be overridden")));
        }
        if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| lower.starts_with(*p)) {
            return Err(ApiError::Validation(format!(
                "header `{name}`: names starting with `{prefix}` are reserved (as in Svix)"
            )));
        }
        if let Some(v) = value {
            if actix_web::http::header::HeaderValue::from_str(v).is_err() {
                return Err(ApiError::Validation(format!("the value of header `{name}` is not valid")));
            }
        }
    }
    Ok(())
}

/// Custom headers given whole (an endpoint's create, an import), checked, in
/// the form they are sealed and stored.
pub fn given_headers(headers: &HashMap<String, String>) -> Result<serde_json::Value, ApiError> {
    self::headers(&headers.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())?;
    Ok(serde_json::json!(headers.iter().collect::<std::collections::BTreeMap<_, _>>()))
}

/// Refuses `filterTypes` naming an event type the tenant does not have (or has
/// archived), as Svix does: a typo would otherwise subscribe to nothing, silently.
/// A type behind a feature flag the caller (a portal token) lacks is unknown to
/// it here as everywhere else.
pub async fn types_exist(
    db: &impl tokio_postgres::GenericClient,
    tenant: &hookgate_shared::ids::TenantId,
    flags: &crate::FeatureFlags,
    types: Option<&[String]>,
) -> Result<(), ApiError> {
    let Some(types) = types.filter(|t| !t.is_empty()) else { return Ok(()) };
    let unknown = hookgate_shared::store::event_types::unknown(db, tenant, types, flags.0.as_deref()).await?;
    if unknown.is_empty() {
        return Ok(());
    }
    let shown: Vec<_> = unknown.iter().take(10).map(|t| format!("`{t}`")).collect();
    Err(ApiError::Validation(format!("`filterTypes`: these event types do not exist: {}", shown.join(", "))))
}

/// The types of `new` that `old` does not hold: what a save subscribes to anew.
/// Only those are checked, so that a portal page sending back a list with a type
/// hidden from it (behind a flag) saves unchanged.
pub fn added_types(new: Option<&[String]>, old: Option<&[String]>) -> Option<Vec<String>> {
    let old = old.unwrap_or_default();
    new.map(|n| n.iter().filter(|t| !old.contains(t)).cloned().collect())
}

/// Addresses an alert e-mail setting may name, at most.
const MOST_ADDRESSES: usize = 20;

/// Comma-separated e-mail addresses, each checked for the shape `local@domain`:
/// no spaces or controls, at most 254 characters, at most [`MOST_ADDRESSES`].
/// Empty: none (`None`). Given back joined by `, `.
pub fn emails(field: &str, raw: &str) -> Result<Option<String>, ApiError> {
    let list: Vec<&str> = raw.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
    if list.len() > MOST_ADDRESSES {
        return Err(ApiError::Validation(format!("`{field}`: at most {MOST_ADDRESSES} addresses")));
    }
    for a in &list {
        let ok = a.len() <= 254
            && !a.chars().any(|c| c.is_whitespace() || c.is_control() || "<>\"();:".contains(c))
            && matches!(a.split_once('@'), Some((local, domain)) if !local.is_empty() && domain.contains('.')
                && !domain.contains('@') && !domain.starts_with('.') && !domain.ends_with('.'));
        if !ok {
            let shown: String = a.chars().take(64).collect();
            return Err(ApiError::Validation(format!("`{field}`: `{shown}` is not an e-mail address")));
        }
    }
    Ok((!list.is_empty()).then(|| list.join(", ")))
}
