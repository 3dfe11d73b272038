//! A destination's configuration: parsed and checked at the API's edge, sealed at
//! rest (it carries credentials), shown back with every credential redacted.

use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    status::EndpointKind,
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ssrf::Guard;

/// What a shown credential is replaced by.
pub const REDACTED: &str = "[redacted]";

/// `rabbitMq`: publish to RabbitMQ's default exchange with a routing key (a
/// queue's name, or a binding of the default exchange), with publisher confirms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RabbitMq {
    /// `amqp://user:pass@host:port/vhost` (the vhost percent-escaped: `%2F` for `/`).
    pub uri: String,
    pub routing_key: String,
    /// Refused by the broker when no queue takes it (a failed attempt), rather
    /// than dropped: Svix's default.
    #[serde(default = "yes")]
    pub mandatory: bool,
}

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

fn yes() -> bool {
    true
}

/// A destination's configuration, of one of the kinds Hookgate publishes to.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", content = "config")]
pub enum Config {
    #[serde(rename = "rabbitMq")]
    RabbitMq(RabbitMq),
    #[serde(rename = "postgres")]
    Postgres(Postgres),
}

/// What is wrong with a configuration, said to the caller (a 422).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(s: impl Into<String>) -> Invalid {
    Invalid(s.into())
}

fn not_served(kind: &str) -> Invalid {
    invalid(format!("destinations of type `{kind}` are not served by Hookgate; the types served are {SERVED}"))
}

/// The `type`s Hookgate publishes to, for messages.
const SERVED: &str = "rabbitMq and postgres";

/// The `type`s Svix lists that Hookgate does not publish to (yet), for the message.
pub const NOT_SERVED: &[&str] = &[
    "sqs",
    "sns",
    "eventBridge",
    "amazonS3",
    "fifoEndpoint",
    "pollingEndpoint",
    "azureBlobStorage",
    "otelTracing",
    "googleCloudStorage",
    "googleCloudPubSub",
    "bigQuery",
    "clickhouse",
    "snowflake",
    "redshift",
    "elasticSearch",
];

impl Config {
    /// Parses a `type` and its `config` object, and checks it: URLs well formed
    /// and aimed at addresses the tenant may reach (`guard`), names within limits.
    pub fn parse(kind: &str, config: Value, guard: &Guard) -> Result<Config, Invalid> {
        let c = match kind {
            "rabbitMq" => Config::RabbitMq(
                serde_json::from_value(config)
                    .map_err(|e| invalid(format!("`config` of a rabbitMq destination: {e}")))?,
            ),
            "postgres" => Config::Postgres(
                serde_json::from_value(config)
                    .map_err(|e| invalid(format!("`config` of a postgres destination: {e}")))?,
            ),
            other if NOT_SERVED.contains(&other) => return Err(not_served(other)),
            other => return Err(invalid(format!("`type` `{other}` is not a destination type"))),
        };
        c.check(guard)?;
        Ok(c)
    }

    pub fn kind(&self) -> EndpointKind {
        match self {
            Config::RabbitMq(_) => EndpointKind::RabbitMq,
            Config::Postgres(_) => EndpointKind::Postgres,
        }
    }

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        match self {
            Config::RabbitMq(r) => {
                let uri = super::rabbitmq::parse_uri(&r.uri).map_err(invalid)?;
                check_host(guard, &uri.authority.host, "uri")?;
                if r.routing_key.len() > 255 {
                    return Err(invalid("`routingKey` is longer than 255 bytes"));
                }
            }
            Config::Postgres(p) => {
                let target = super::postgres::parse_url(&p.url).map_err(invalid)?;
                check_host(guard, &target.host, "url")?;
                super::postgres::table_name(&p.table_name).map_err(invalid)?;
                if p.ssl_root_cert.as_deref().is_some_and(|pem| pem.len() > 64 * 1024) {
                    return Err(invalid("`sslRootCert` is longer than 64 KiB"));
                }
            }
        }
        Ok(())
    }

    /// Where it delivers, with no credential: what the attempt log and the console
    /// show in place of an endpoint's URL.
    pub fn locator(&self) -> String {
        match self {
            Config::RabbitMq(r) => format!("{}#{}", without_password(&r.uri, false), r.routing_key),
            Config::Postgres(p) => format!("{}#{}", without_password(&p.url, false), p.table_name),
        }
    }

    /// The configuration as the API shows it: credentials replaced by
    /// `[redacted]`, a password field left out (Svix's `…ConfigOut`).
    pub fn shown(&self) -> Value {
        match self {
            Config::RabbitMq(r) => {
                let r = RabbitMq { uri: without_password(&r.uri, true), ..r.clone() };
                serde_json::to_value(r).expect("a configuration serialises")
            }
            Config::Postgres(p) => {
                let p = Postgres { url: without_password(&p.url, true), password: None, ..p.clone() };
                serde_json::to_value(p).expect("a configuration serialises")
            }
        }
    }

    /// Applies a PATCH's `config` object: its fields replace the stored ones; a
    /// redacted value sent back (`[redacted]`, a URL with it) keeps the stored secret.
    pub fn patched(&self, patch: &Value, guard: &Guard) -> Result<Config, Invalid> {
        let Some(fields) = patch.as_object() else { return Err(invalid("`config` must be an object")) };
        let mut whole = serde_json::to_value(self).expect("a configuration serialises");
        let kind = whole["type"].as_str().unwrap_or_default().to_owned();
        let stored = whole["config"].as_object_mut().expect("a configuration is an object");
        for (k, v) in fields {
            if v.is_null() {
                stored.remove(k);
            } else {
                stored.insert(k.clone(), v.clone());
            }
        }
        let merged = whole["config"].take();
        let mut c = Config::parse(&kind, merged, guard)?;
        c.keep_redacted(self);
        Ok(c)
    }

    /// Where this configuration carries a redacted value (it was read and sent
    /// back), the stored one stays.
    pub fn keep_redacted(&mut self, stored: &Config) {
        match (self, stored) {
            (Config::RabbitMq(new), Config::RabbitMq(old)) => new.uri = keep_password(&new.uri, &old.uri),
            (Config::Postgres(new), Config::Postgres(old)) => {
                new.url = keep_password(&new.url, &old.url);
                if new.password.as_deref() == Some(REDACTED) {
                    new.password = old.password.clone();
                }
            }
            _ => {}
        }
    }

    /// The sealed form stored in `endpoints.destination`.
    pub fn seal(&self, state: &AppState, tenant: &TenantId, app: &AppId, ep: &EndpointId) -> Vec<u8> {
        let text = serde_json::to_vec(self).expect("a configuration serialises");
        state.config.master_key.tenant_key(tenant).seal(&purpose(app, ep), &text)
    }

    /// Opens a stored configuration.
    pub fn open(
        state: &AppState,
        tenant: &TenantId,
        app: &AppId,
        ep: &EndpointId,
        sealed: &[u8],
    ) -> Result<Config, String> {
        let text =
            state.config.master_key.tenant_key(tenant).open(&purpose(app, ep), sealed).map_err(|e| e.to_string())?;
        serde_json::from_slice(&text).map_err(|e| e.to_string())
    }
}

/// The associated data that binds a sealed configuration to its destination.
fn purpose(app: &AppId, ep: &EndpointId) -> String {
    format!("destination-config:{app}:{ep}")
}

/// A host a tenant names must be one it may reach: an address literal (or
/// `localhost`) is checked now; a name is checked again, resolved, at connect time.
fn check_host(guard: &Guard, host: &str, field: &str) -> Result<(), Invalid> {
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

/// A URL with its password replaced by `[redacted]` (`mark`) or with its user
/// information left out; text that is not a URL is shown as `[redacted]`.
fn without_password(raw: &str, mark: bool) -> String {
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
fn keep_password(new: &str, old: &str) -> String {
    let (Ok(mut n), Ok(o)) = (url::Url::parse(new), url::Url::parse(old)) else { return new.to_owned() };
    let marked = n.password().is_some_and(|p| p == REDACTED || p == "%5Bredacted%5D");
    if marked {
        let _ = n.set_password(o.password());
        return n.to_string();
    }
    new.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn open_guard() -> Guard {
        Guard::new(vec!["127.0.0.0/8".parse().unwrap()])
    }

    #[test]
    fn a_rabbitmq_uri_is_shown_without_its_password_and_a_patch_sending_it_back_keeps_it() {
        let c = Config::parse(
            "rabbitMq",
            json!({"uri": "amqp://app:s3cret@127.0.0.1:5672/%2F", "routingKey": "orders"}),
            &open_guard(),
        )
        .unwrap();
        let shown = c.shown();
        assert!(!shown.to_string().contains("s3cret"), "{shown}");
        assert_eq!(shown["mandatory"], json!(true), "mandatory by default");
        assert!(!c.locator().contains("s3cret") && !c.locator().contains("app@"), "{}", c.locator());
        let back = c.patched(&json!({"uri": shown["uri"], "routingKey": "invoices"}), &open_guard()).unwrap();
        let Config::RabbitMq(r) = back else { panic!("kind changed") };
        assert_eq!(r.uri, "amqp://app:s3cret@127.0.0.1:5672/%2F");
        assert_eq!(r.routing_key, "invoices");
    }

    #[test]
    fn a_postgres_password_is_never_shown_and_unknown_fields_are_refused() {
        let c = Config::parse(
            "postgres",
            json!({"url": "postgres://app@127.0.0.1:5432/db", "password": "pw", "tableName": "public.events"}),
            &open_guard(),
        )
        .unwrap();
        assert!(c.shown().get("password").is_none());
        let e = Config::parse(
            "postgres",
            json!({"url": "postgres://127.0.0.1/db", "tableName": "t", "x": 1}),
            &open_guard(),
        )
        .unwrap_err();
        assert!(e.0.contains("unknown field `x`"), "{e}");
    }

    #[test]
    fn blocked_hosts_unserved_types_and_bad_names_are_refused_with_a_reason() {
        let closed = Guard::new(vec![]);
        let e =
            Config::parse("rabbitMq", json!({"uri": "amqp://127.0.0.1/%2F", "routingKey": "q"}), &closed).unwrap_err();
        assert!(e.0.contains("`uri` is refused"), "{e}");
        let e = Config::parse("sqs", json!({}), &closed).unwrap_err();
        assert!(e.0.contains("not served"), "{e}");
        let e =
            Config::parse("postgres", json!({"url": "postgres://127.0.0.1/db", "tableName": "a\"b"}), &open_guard())
                .unwrap_err();
        assert!(e.0.contains("tableName"), "{e}");
        let e = Config::parse(
            "postgres",
            json!({"url": "postgres://127.0.0.1/db?sslrootcert=/etc/shadow", "tableName": "t"}),
            &open_guard(),
        )
        .unwrap_err();
        assert!(e.0.contains("sslrootcert"), "{e}");
    }
}
