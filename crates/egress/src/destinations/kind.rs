//! What every destination kind owns (the [`Kind`] trait), and the checks and
//! credential handling the kinds share.

use hookgate_shared::status::EndpointKind;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use super::{Failure, HandOver, Outbound};
use crate::ssrf::Guard;

/// What a shown credential is replaced by.
pub const REDACTED: &str = "[redacted]";

/// What is wrong with a configuration, said to the caller (a 422).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub(crate) fn invalid(s: impl Into<String>) -> Invalid {
    Invalid(s.into())
}

/// A destination kind's configuration and behaviour, each in its own file
/// (`destinations/<kind>.rs`). No method has a default: a new kind says what
/// each means for it, its secrets' carrying over on a PATCH included.
pub(crate) trait Kind: Serialize + DeserializeOwned + Clone + PartialEq {
    /// Its row in the kinds table (`hookgate_shared::status`).
    const KIND: EndpointKind;

    /// Checks a parsed configuration: URLs well formed and aimed at addresses
    /// the tenant may reach (`guard`), names within limits.
    fn check(&self, guard: &Guard) -> Result<(), Invalid>;

    /// Where it delivers, with no credential: what the attempt log and the
    /// console show in place of an endpoint's URL.
    fn locator(&self) -> String;

    /// The configuration as the API shows it: credentials replaced by
    /// `[redacted]` or left out (Svix's `…ConfigOut`). `names_only`: headers by
    /// name only, every one of them (a portal link is not shown header values).
    fn shown(&self, names_only: bool) -> Value;

    /// Where this configuration carries a redacted value or leaves a secret out
    /// (it was read and sent back), the secret of `stored` stays, but only while
    /// everything else about where it goes is the same: a secret is never carried
    /// to another host, port, user, database or TLS setting.
    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid>;

    /// The hosts and ports a hand-over dials, with the field that names each
    /// (AWS's own hosts, when no `endpointUrl` is given, are left out).
    fn dialled(&self) -> Vec<(&'static str, String, u16)>;

    /// Hands one message over: the other side's answer, or why it failed.
    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure>;
}

/// `config` parsed as a `T`, or why not, naming the kind.
pub(super) fn parsed<T: Kind>(config: Value) -> Result<T, Invalid> {
    let kind = T::KIND.type_name().unwrap_or("http");
    serde_json::from_value(config).map_err(|e| invalid(format!("`config` of a {kind} destination: {e}")))
}

/// A configuration as the API shows it.
pub(super) fn as_value(c: &impl Serialize) -> Value {
    serde_json::to_value(c).expect("a configuration serialises")
}

/// A host a tenant names must be one it may reach: an address literal (or
/// `localhost`) is checked now; a name is checked again, resolved, at connect time.
pub(super) fn check_host(guard: &Guard, host: &str, field: &str) -> Result<(), Invalid> {
    let url = url::Url::parse(&format!("http://{}/", bracketed(host)))
        .map_err(|_| invalid(format!("`{field}` has no valid host")))?;
    guard.check_url(&url).map_err(|b| invalid(format!("`{field}` is refused: {b}")))
}

/// An IPv6 literal as a URL's host wants it.
fn bracketed(host: &str) -> String {
    match host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{host}]"),
        Err(_) => host.to_owned(),
    }
}

/// An absolute http(s) URL whose host the tenant may reach.
pub(super) fn check_http_url(guard: &Guard, raw: &str, field: &str) -> Result<(), Invalid> {
    let url = url::Url::parse(raw).map_err(|e| invalid(format!("`{field}` is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(format!("`{field}` must be an absolute http or https URL")));
    }
    guard.check_url(&url).map_err(|b| invalid(format!("`{field}` is refused: {b}")))
}

/// The host and port an http(s) URL dials, with the field that names it.
pub(super) fn http_dialled(field: &'static str, raw: &str) -> Option<(&'static str, String, u16)> {
    let url = url::Url::parse(raw).ok()?;
    let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
    Some((field, host, url.port_or_known_default()?))
}

/// A URL with its password replaced by `[redacted]` (`mark`) or with its user
/// information left out; text that is not a URL is shown as `[redacted]`.
pub(super) fn without_password(raw: &str, mark: bool) -> String {
    let Ok(mut url) = url::Url::parse(raw) else { return REDACTED.to_owned() };
    if url.password().is_some() {
        let _ = match mark {
            true => url.set_password(Some(REDACTED)),
            false => url.set_password(None),
        };
    }
    if !mark {
        let _ = url.set_username("");
    }
    url.to_string()
}

/// `new`, or `new` with `old`'s password where `new` carries the redacted mark.
pub(super) fn keep_password(new: &str, old: &str, field: &str) -> Result<String, Invalid> {
    let (Ok(mut n), Ok(o)) = (url::Url::parse(new), url::Url::parse(old)) else { return Ok(new.to_owned()) };
    let marked = n.password().is_some_and(|p| p == REDACTED || p == "%5Bredacted%5D");
    if !marked {
        return Ok(new.to_owned());
    }
    if !same_target(new, old) {
        return Err(invalid(format!("`{field}`: give the password again, since where it connects changed")));
    }
    let _ = n.set_password(o.password());
    Ok(n.to_string())
}

/// Two URLs that differ at most in their password: the same scheme, user, host,
/// port, path and query.
pub(super) fn same_target(a: &str, b: &str) -> bool {
    let strip = |s: &str| {
        url::Url::parse(s).ok().map(|mut u| {
            let _ = u.set_password(None);
            u.to_string()
        })
    };
    strip(a).is_some() && strip(a) == strip(b)
}
