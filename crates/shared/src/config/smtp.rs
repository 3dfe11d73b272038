//! The SMTP server alert e-mails go through (`HOOKGATE_SMTP_URL`), parsed once at
//! start: the alert sender (egress's `alerts`) builds its client from it.

use super::{raw::Raw, ConfigError};

/// How the connection to the SMTP server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// STARTTLS, required: the server must offer it (`smtp://`).
    StartTls,
    /// TLS from the first byte (`smtps://`).
    Implicit,
    /// None (`smtp://…?tls=none`): a relay on loopback only.
    None,
}

/// The operator's SMTP server.
#[derive(Clone)]
pub struct Smtp {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    /// User and password for AUTH, if the URL has them.
    pub credentials: Option<(String, String)>,
    /// PEM roots trusted for the server, besides the system's.
    pub ca_file: Option<String>,
    /// The alerts' `From`.
    pub from: String,
}

impl std::fmt::Debug for Smtp {
    // Hand-written: the password never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smtp").field("host", &self.host).field("port", &self.port).field("tls", &self.tls).finish()
    }
}

/// `HOOKGATE_SMTP_URL` and its companions, if set.
pub(super) fn parse(raw: &Raw) -> Result<Option<Smtp>, ConfigError> {
    let from = raw.get("alert_from").unwrap_or("").trim().to_owned();
    let addr = from.rsplit_once('<').map_or(from.as_str(), |(_, a)| a.trim_end_matches('>'));
    if !matches!(addr.split_once('@'), Some((l, d)) if !l.is_empty() && !d.is_empty())
        || from.chars().any(|c| c.is_control())
    {
        return Err(Raw::invalid("alert_from", format!("`{from}` is not an e-mail address")));
    }
    let Some(given) = raw.get("smtp_url") else { return Ok(None) };
    let bad = |why: &str| Raw::invalid("smtp_url", why.to_owned());
    let url = url::Url::parse(given).map_err(|e| bad(&format!("not a URL: {e}")))?;
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let mut tls = match url.scheme() {
        "smtp" => SmtpTls::StartTls,
        "smtps" => SmtpTls::Implicit,
        _ => return Err(bad("must start with smtp:// or smtps://")),
    };
    for (k, v) in url.query_pairs() {
        match (k.as_ref(), v.as_ref(), tls) {
            ("tls", "none", SmtpTls::StartTls) => tls = SmtpTls::None,
            ("tls", "required" | "starttls", SmtpTls::StartTls) => {}
            _ => return Err(bad(&format!("unknown option `{k}={v}` (only `tls=none` on smtp://)"))),
        }
    }
    // Without TLS the password would cross the network in clear: only to a relay on this host.
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if tls == SmtpTls::None && !loopback {
        return Err(bad("`tls=none` is only for a relay on loopback (127.0.0.1, ::1 or localhost)"));
    }
    let port = url.port().unwrap_or(if tls == SmtpTls::Implicit { 465 } else { 587 });
    let decode = |s: &str| percent_decode(s).ok_or_else(|| bad("its user or password is not valid percent-encoding"));
    let credentials = match (url.username(), url.password()) {
        ("", None) => None,
        (user, Some(pass)) => Some((decode(user)?, decode(pass)?)),
        (_, None) => return Err(bad("names a user without a password")),
    };
    let ca_file = raw.get("smtp_ca_file").map(str::to_owned);
    if let Some(path) = &ca_file {
        std::fs::metadata(path).map_err(|e| Raw::invalid("smtp_ca_file", format!("`{path}`: {e}")))?;
    }
    Ok(Some(Smtp { host, port, tls, credentials, ca_file, from }))
}

/// `%XX` sequences decoded; `None` if they do not make UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s).decode_utf8().ok().map(|c| c.into_owned())
}
