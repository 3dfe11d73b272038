//! The `postgres` destination: one row per message in a table of the tenant's
//! database, made if missing. The message id is the table's key, so a message
//! delivered twice (a lost answer, a replay) is one row.
//!
//! Hookgate dials the address the guard allowed itself and speaks through
//! `wire`, which holds each message the server sends to 64 KiB.

mod link;
mod wire;

use hookgate_shared::{db::tls, status::EndpointKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_postgres::config::Host;

use super::{
    kind::{as_value, check_host, invalid, keep_password, same_target, without_password, Invalid, Kind, REDACTED},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

pub(super) use link::Links;

/// `postgres`: one row per message in a table of a tenant's database.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Postgres {
    /// `postgres://user@host:port/dbname?sslmode=…`.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `table` or `schema.table`; each part is quoted as given.
    pub table_name: String,
    /// PEM text of the CA that signs the server's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_root_cert: Option<String>,
}

impl Kind for Postgres {
    const KIND: EndpointKind = EndpointKind::Postgres;

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        let target = parse_url(&self.url).map_err(invalid)?;
        check_host(guard, &target.host, "url")?;
        table_name(&self.table_name).map_err(invalid)?;
        if self.ssl_root_cert.as_deref().is_some_and(|pem| pem.len() > 64 * 1024) {
            return Err(invalid("`sslRootCert` is longer than 64 KiB"));
        }
        // Made now, so a certificate that does not parse is refused here, not at every attempt.
        tls::tenant_connector(&target.tls, self.ssl_root_cert.as_deref())
            .map_err(|e| invalid(format!("`sslRootCert`: {e}")))?;
        Ok(())
    }

    fn locator(&self) -> String {
        format!("{}#{}", without_password(&self.url, false), self.table_name)
    }

    fn shown(&self, _names_only: bool) -> Value {
        as_value(&Postgres { url: without_password(&self.url, true), password: None, ..self.clone() })
    }

    fn keep_redacted(&mut self, stored: &Self) -> Result<(), Invalid> {
        self.url = keep_password(&self.url, &stored.url, "url")?;
        let same = same_target(&self.url, &stored.url) && self.ssl_root_cert == stored.ssl_root_cert;
        match self.password.as_deref() {
            Some(REDACTED) if !same => {
                return Err(invalid("`password`: give it again, since `url` or `sslRootCert` changed"))
            }
            Some(REDACTED) | None if same => self.password.clone_from(&stored.password),
            _ => {}
        }
        Ok(())
    }

    fn dialled(&self) -> Vec<(&'static str, String, u16)> {
        parse_url(&self.url).map(|t| vec![("url", t.host, t.port)]).unwrap_or_default()
    }

    async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
        at.links.postgres.publish(at.key, at.fingerprint, self, &at.dial, out).await
    }
}

/// What a destination's URL may set in its query, besides `sslmode`: where and
/// how to connect. The rest of what libpq and tokio-postgres read is refused:
/// `options` sets any server setting for the session (`-c …`), and
/// `application_name`, `replication` and the like change what the server does
/// or shows; the client's own settings (keepalives, `tcp_user_timeout`,
/// `target_session_attrs`, `load_balance_hosts`, `sslnegotiation`) are
/// Hookgate's to choose, since it dials the address itself.
const URL_PARAMETERS: &[&str] = &["dbname", "host", "port", "connect_timeout", "channel_binding"];

/// A tenant's database as its URL names it.
pub(super) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: tls::TlsSettings,
    pub host: String,
    pub port: u16,
}

/// Parses a `postgres://` URL a tenant gives: one TCP host, TLS as libpq's
/// `sslmode`, and nothing that reads a file of this host or dials elsewhere.
pub(super) fn parse_url(raw: &str) -> Result<Target, String> {
    if !(raw.starts_with("postgres://") || raw.starts_with("postgresql://")) {
        return Err("`url` must be a postgres:// URL".into());
    }
    let (url, settings) =
        tls::split(raw).map_err(|e| format!("`url`: {}", e.to_string().replace("DATABASE_URL: ", "")))?;
    for (name, given) in
        [("sslrootcert", &settings.root_cert), ("sslcert", &settings.client_cert), ("sslkey", &settings.client_key)]
    {
        if given.is_some() {
            return Err(format!(
                "`url` may not name {name} (a file of Hookgate's host); give `sslRootCert` as PEM text"
            ));
        }
    }
    // A password is given in `password`, where it is never shown back; a user in the URL's user part.
    if let Some((_, query)) = url.split_once('?') {
        for (k, _) in url::form_urlencoded::parse(query.as_bytes()) {
            if matches!(k.as_ref(), "password" | "user") {
                return Err(format!(
                    "`url` may not set `{k}` in its query: give the user before `@`, the password in `password`"
                ));
            }
            if !URL_PARAMETERS.contains(&k.as_ref()) {
                return Err(format!(
                    "`url` may not set `{k}`: a destination's URL sets only {} (and sslmode); server settings such as `options` are refused",
                    URL_PARAMETERS.join(", ")
                ));
            }
        }
    }
    let config: tokio_postgres::Config = url.parse().map_err(|e| format!("`url` is not a valid Postgres URL: {e}"))?;
    if !config.get_hostaddrs().is_empty() {
        return Err("`url` may not set hostaddr".into());
    }
    let host = match config.get_hosts() {
        [Host::Tcp(h)] => h.clone(),
        [] => return Err("`url` names no host".into()),
        [_] => return Err("`url` must name a TCP host, not a socket directory".into()),
        _ => return Err("`url` must name one host".into()),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    Ok(Target { config, tls: settings, host, port })
}

/// `table` or `schema.table`, each part quoted as given.
pub(super) fn table_name(raw: &str) -> Result<String, String> {
    let parts: Vec<&str> = raw.split('.').collect();
    let bad = |p: &&str| p.is_empty() || p.len() > 63 || p.contains(['"', '\0']);
    if parts.len() > 2 || parts.iter().any(bad) {
        return Err("`tableName` must be `table` or `schema.table`, each part 1 to 63 bytes without quotes".into());
    }
    Ok(parts.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_name_is_quoted_part_by_part_and_quotes_are_refused() {
        assert_eq!(table_name("public.events").unwrap(), "\"public\".\"events\"");
        assert_eq!(table_name("Events").unwrap(), "\"Events\"");
        for bad in ["", "a.b.c", "x\"; DROP TABLE y; --", "a..b", &"t".repeat(64)] {
            assert!(table_name(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn a_url_that_reads_a_local_file_or_a_socket_is_refused() {
        assert!(parse_url("postgres://u@127.0.0.1:5433/db?sslmode=require").is_ok());
        for bad in [
            "postgres://u@127.0.0.1/db?sslrootcert=/etc/ssl/x.pem",
            "postgres://u@127.0.0.1/db?sslkey=/k&sslcert=/c",
            "postgres://u@%2Fvar%2Frun%2Fpostgresql/db",
            "postgres://u@127.0.0.1/db?hostaddr=127.0.0.2",
            "postgres://u@a,b/db",
            "mysql://u@127.0.0.1/db",
            "postgres://u@127.0.0.1/db?options=-c%20search_path%3Dpublic",
            "postgres://u@127.0.0.1/db?%6Fptions=-c%20default_transaction_read_only%3Doff",
            "postgres://u@127.0.0.1/db?application_name=x",
            "postgres://u@127.0.0.1/db?sslnegotiation=direct&sslmode=require",
            "postgres://u@127.0.0.1/db?keepalives=0",
        ] {
            assert!(parse_url(bad).is_err(), "{bad} was taken");
        }
    }
}
