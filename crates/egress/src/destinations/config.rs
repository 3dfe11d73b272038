//! A destination's configuration: parsed and checked at the API's edge, sealed at
//! rest (it carries credentials), shown back with every credential redacted.

use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    status::EndpointKind,
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::aws_config::check_http_url;
pub use super::aws_config::{AwsAccess, EventBridge, Sns, Sqs, S3};
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

/// `fifoEndpoint`: an HTTP receiver given batches in strict order (`crate::fifo`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fifo {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// `pollingEndpoint`: the customer reads its messages (`/poller/{sink}`); nothing to configure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Polling {}

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
    #[serde(rename = "sqs")]
    Sqs(Sqs),
    #[serde(rename = "sns")]
    Sns(Sns),
    #[serde(rename = "eventBridge")]
    EventBridge(EventBridge),
    #[serde(rename = "amazonS3")]
    AmazonS3(S3),
    #[serde(rename = "fifoEndpoint")]
    FifoEndpoint(Fifo),
    #[serde(rename = "pollingEndpoint")]
    PollingEndpoint(Polling),
}

/// What is wrong with a configuration, said to the caller (a 422).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub(super) fn invalid(s: impl Into<String>) -> Invalid {
    Invalid(s.into())
}

fn of<T: serde::de::DeserializeOwned>(kind: &str, config: Value) -> Result<T, Invalid> {
    serde_json::from_value(config).map_err(|e| invalid(format!("`config` of a {kind} destination: {e}")))
}

/// A FIFO endpoint's `key` as a path into the payload: `customer.id` is
/// `["customer", "id"]`; 1 to 5 parts of 1 to 64 letters, digits, `_` or `-`.
pub fn key_path(key: &str) -> Result<Vec<String>, Invalid> {
    let parts: Vec<String> = key.split('.').map(str::to_owned).collect();
    let ok = |p: &String| {
        (1..=64).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    };
    match parts.len() <= 5 && parts.iter().all(ok) {
        true => Ok(parts),
        false => Err(invalid("`key` must be a path into the payload such as `customer.id`: 1 to 5 parts of 1 to 64 letters, digits, `_` or `-`")),
    }
}

impl Config {
    /// A keyed FIFO endpoint's key path, for the fan-out.
    pub fn fifo_key(&self) -> Option<Vec<String>> {
        match self {
            Config::FifoEndpoint(Fifo { key: Some(k), .. }) => key_path(k).ok(),
            _ => None,
        }
    }
}

fn not_served(kind: &str) -> Invalid {
    invalid(format!("destinations of type `{kind}` are not served by Hookgate; the types served are {SERVED}"))
}

/// The `type`s Hookgate publishes to, for messages.
const SERVED: &str = "rabbitMq, postgres, sqs, sns, eventBridge, amazonS3, fifoEndpoint and pollingEndpoint";

/// The `type`s Svix lists that Hookgate does not publish to (yet), for the message.
pub const NOT_SERVED: &[&str] = &[
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
        Self::parse_keeping(kind, config, guard, None)
    }

    /// [`Config::parse`], with the secrets of `stored` kept where the new one
    /// carries them redacted or leaves them out (a configuration read and sent back).
    pub fn parse_keeping(kind: &str, config: Value, guard: &Guard, stored: Option<&Config>) -> Result<Config, Invalid> {
        if let Some(fields) = config.as_object() {
            for (k, v) in fields {
                if v.as_str().is_some_and(|s| s.contains('\0')) {
                    return Err(invalid(format!("`config.{k}` contains a NUL character")));
                }
            }
        }
        let mut c = match kind {
            "rabbitMq" => Config::RabbitMq(
                serde_json::from_value(config)
                    .map_err(|e| invalid(format!("`config` of a rabbitMq destination: {e}")))?,
            ),
            "postgres" => Config::Postgres(
                serde_json::from_value(config)
                    .map_err(|e| invalid(format!("`config` of a postgres destination: {e}")))?,
            ),
            "sqs" => Config::Sqs(of("sqs", config)?),
            "sns" => Config::Sns(of("sns", config)?),
            "eventBridge" => Config::EventBridge(of("eventBridge", config)?),
            "amazonS3" => Config::AmazonS3(of("amazonS3", config)?),
            "fifoEndpoint" => Config::FifoEndpoint(of("fifoEndpoint", config)?),
            "pollingEndpoint" => Config::PollingEndpoint(of("pollingEndpoint", config)?),
            other if NOT_SERVED.contains(&other) => return Err(not_served(other)),
            other => return Err(invalid(format!("`type` `{other}` is not a destination type"))),
        };
        if let Some(stored) = stored {
            c.keep_redacted(stored)?;
        }
        c.check(guard)?;
        Ok(c)
    }

    pub fn kind(&self) -> EndpointKind {
        match self {
            Config::RabbitMq(_) => EndpointKind::RabbitMq,
            Config::Postgres(_) => EndpointKind::Postgres,
            Config::Sqs(_) => EndpointKind::Sqs,
            Config::Sns(_) => EndpointKind::Sns,
            Config::EventBridge(_) => EndpointKind::EventBridge,
            Config::AmazonS3(_) => EndpointKind::AmazonS3,
            Config::FifoEndpoint(_) => EndpointKind::FifoEndpoint,
            Config::PollingEndpoint(_) => EndpointKind::PollingEndpoint,
        }
    }

    fn check(&self, guard: &Guard) -> Result<(), Invalid> {
        match self {
            Config::RabbitMq(r) => {
                let uri = super::rabbitmq::parse_uri(&r.uri).map_err(invalid)?;
                check_host(guard, &uri.authority.host, "uri")?;
                if r.routing_key.len() > 255 || r.routing_key.contains('\0') {
                    return Err(invalid("`routingKey` must be at most 255 bytes, without NUL"));
                }
            }
            Config::Postgres(p) => {
                let target = super::postgres::parse_url(&p.url).map_err(invalid)?;
                check_host(guard, &target.host, "url")?;
                super::postgres::table_name(&p.table_name).map_err(invalid)?;
                if p.ssl_root_cert.as_deref().is_some_and(|pem| pem.len() > 64 * 1024) {
                    return Err(invalid("`sslRootCert` is longer than 64 KiB"));
                }
                // Made now, so a certificate that does not parse is refused here, not at every attempt.
                hookgate_shared::db::tls::tenant_connector(&target.tls, p.ssl_root_cert.as_deref())
                    .map_err(|e| invalid(format!("`sslRootCert`: {e}")))?;
            }
            Config::Sqs(q) => {
                check_http_url(guard, &q.queue_url, "queueUrl")?;
                q.check_aws(guard)?;
            }
            Config::Sns(t) => {
                if !t.topic_arn.starts_with("arn:") {
                    return Err(invalid("`topicArn` must be an ARN (`arn:aws:sns:region:account:name`)"));
                }
                t.check_aws(guard)?;
            }
            Config::EventBridge(b) => {
                if b.event_bus_name.is_empty() || b.event_bus_name.len() > 1600 {
                    return Err(invalid("`eventBusName` must be 1 to 1600 characters"));
                }
                b.check_aws(guard)?;
            }
            Config::AmazonS3(b) => {
                let ok = (3..=63).contains(&b.bucket.len())
                    && b.bucket.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.');
                if !ok {
                    return Err(invalid("`bucket` must be an S3 bucket name (3 to 63 of a-z, 0-9, `-`, `.`)"));
                }
                b.check_aws(guard)?;
            }
            Config::FifoEndpoint(f) => {
                check_http_url(guard, &f.url, "url")?;
                if let Some(h) = &f.headers {
                    if h.len() > 20 || h.iter().any(|(k, v)| k.is_empty() || k.len() > 256 || v.len() > 4096) {
                        return Err(invalid("`headers`: at most 20, names of 1 to 256 bytes, values up to 4 KiB"));
                    }
                }
                if let Some(k) = &f.key {
                    key_path(k)?;
                }
            }
            Config::PollingEndpoint(_) => {}
        }
        Ok(())
    }

    /// Where it delivers, with no credential: what the attempt log and the console
    /// show in place of an endpoint's URL.
    pub fn locator(&self) -> String {
        match self {
            Config::RabbitMq(r) => format!("{}#{}", without_password(&r.uri, false), r.routing_key),
            Config::Postgres(p) => format!("{}#{}", without_password(&p.url, false), p.table_name),
            Config::Sqs(q) => without_password(&q.queue_url, false),
            Config::Sns(t) => t.topic_arn.clone(),
            Config::EventBridge(b) => format!("eventbridge:{}:{}", b.region(), b.event_bus_name),
            Config::AmazonS3(b) => format!("s3://{}", b.bucket),
            Config::FifoEndpoint(f) => f.url.clone(),
            Config::PollingEndpoint(_) => "poller".to_owned(),
        }
    }

    /// The configuration as the API shows it: credentials replaced by
    /// `[redacted]`, a password field left out (Svix's `…ConfigOut`).
    /// `names_only`: a FIFO endpoint's headers by name only, every one of them
    /// (a portal link not shown header values, as `…/headers` answers it).
    pub fn shown(&self, names_only: bool) -> Value {
        match self {
            Config::RabbitMq(r) => {
                let r = RabbitMq { uri: without_password(&r.uri, true), ..r.clone() };
                serde_json::to_value(r).expect("a configuration serialises")
            }
            Config::Postgres(p) => {
                let p = Postgres { url: without_password(&p.url, true), password: None, ..p.clone() };
                serde_json::to_value(p).expect("a configuration serialises")
            }
            // Svix's `…ConfigOut`: the secret key left out, the region as used.
            Config::Sqs(q) => {
                let q = Sqs { secret_access_key: None, region: Some(q.region()), ..q.clone() };
                serde_json::to_value(q).expect("a configuration serialises")
            }
            Config::Sns(t) => {
                let t = Sns { secret_access_key: None, region: Some(t.region()), ..t.clone() };
                serde_json::to_value(t).expect("a configuration serialises")
            }
            Config::EventBridge(b) => {
                let b = EventBridge { secret_access_key: None, region: Some(b.region()), ..b.clone() };
                serde_json::to_value(b).expect("a configuration serialises")
            }
            Config::AmazonS3(b) => {
                let b = S3 { secret_access_key: None, region: Some(b.region()), ..b.clone() };
                serde_json::to_value(b).expect("a configuration serialises")
            }
            // Svix's `SinkHttpConfigOut`: headers as an endpoint's are shown, the
            // credential-like ones by name only.
            Config::FifoEndpoint(f) => {
                let (mut shown, mut sensitive) = (serde_json::Map::new(), Vec::new());
                for (k, v) in f.headers.iter().flatten() {
                    match names_only || crate::secrets::SENSITIVE_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                        true => sensitive.push(k.clone()),
                        false => drop(shown.insert(k.clone(), Value::String(v.clone()))),
                    }
                }
                serde_json::json!({"url": f.url, "headers": {"headers": shown, "sensitive": sensitive}, "key": f.key})
            }
            Config::PollingEndpoint(_) => serde_json::json!({}),
        }
    }

    /// Applies a PATCH's `config` object: its fields replace the stored ones; a
    /// redacted value sent back (`[redacted]`, a URL with it) keeps the stored secret.
    pub fn patched(&self, patch: &Value, guard: &Guard) -> Result<Config, Invalid> {
        let Some(fields) = patch.as_object() else { return Err(invalid("`config` must be an object")) };
        let mut whole = serde_json::to_value(self).expect("a configuration serialises");
        let kind = whole["type"].as_str().unwrap_or_default().to_owned();
        let stored = whole["config"].as_object_mut().expect("a configuration is an object");
        // The stored secrets go in as if the PATCH had sent them back unread: left
        // out or redacted, so `keep_redacted` carries them over only to the same place.
        for secret in ["password", "secretAccessKey"] {
            stored.remove(secret);
        }
        if let Some(headers) = stored.get_mut("headers").and_then(Value::as_object_mut) {
            for (k, v) in headers.iter_mut() {
                if crate::secrets::SENSITIVE_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
        }
        for (k, v) in fields {
            if v.is_null() {
                stored.remove(k);
            } else {
                stored.insert(k.clone(), v.clone());
            }
        }
        let merged = whole["config"].take();
        Config::parse_keeping(&kind, merged, guard, Some(self))
    }

    /// Where this configuration carries a redacted value or leaves a secret out
    /// (it was read and sent back), the stored secret stays, but only while
    /// everything else about where it goes is the same: a secret is never carried
    /// to another host, port, user, database or TLS setting.
    fn keep_redacted(&mut self, stored: &Config) -> Result<(), Invalid> {
        match (self, stored) {
            (Config::RabbitMq(new), Config::RabbitMq(old)) => new.uri = keep_password(&new.uri, &old.uri, "uri")?,
            (Config::Postgres(new), Config::Postgres(old)) => {
                new.url = keep_password(&new.url, &old.url, "url")?;
                let same = same_target(&new.url, &old.url) && new.ssl_root_cert == old.ssl_root_cert;
                match new.password.as_deref() {
                    Some(REDACTED) if !same => {
                        return Err(invalid("`password`: give it again, since `url` or `sslRootCert` changed"))
                    }
                    Some(REDACTED) | None if same => new.password.clone_from(&old.password),
                    _ => {}
                }
            }
            (Config::Sqs(new), Config::Sqs(old)) => {
                let at = (new.access_key_id.clone(), new.endpoint_url.clone(), new.region());
                let was = (old.access_key_id.clone(), old.endpoint_url.clone(), old.region());
                keep_secret_key(&mut new.secret_access_key, at, &old.secret_access_key, was)
            }
            (Config::Sns(new), Config::Sns(old)) => {
                let at = (new.access_key_id.clone(), new.endpoint_url.clone(), new.region());
                let was = (old.access_key_id.clone(), old.endpoint_url.clone(), old.region());
                keep_secret_key(&mut new.secret_access_key, at, &old.secret_access_key, was)
            }
            (Config::EventBridge(new), Config::EventBridge(old)) => {
                let at = (new.access_key_id.clone(), new.endpoint_url.clone(), new.region());
                let was = (old.access_key_id.clone(), old.endpoint_url.clone(), old.region());
                keep_secret_key(&mut new.secret_access_key, at, &old.secret_access_key, was)
            }
            (Config::AmazonS3(new), Config::AmazonS3(old)) => {
                let at = (new.access_key_id.clone(), new.endpoint_url.clone(), new.region());
                let was = (old.access_key_id.clone(), old.endpoint_url.clone(), old.region());
                keep_secret_key(&mut new.secret_access_key, at, &old.secret_access_key, was)
            }
            (Config::FifoEndpoint(new), Config::FifoEndpoint(old)) => {
                // A sensitive header sent back redacted keeps its value, for the same URL only.
                let same = new.url == old.url;
                for (k, v) in new.headers.iter_mut().flatten() {
                    if v == REDACTED {
                        match old.headers.as_ref().and_then(|o| o.get(k)).filter(|_| same) {
                            Some(kept) => v.clone_from(kept),
                            None => return Err(invalid(format!("`headers`: give `{k}` again"))),
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
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

/// A secret key left out (it is never shown) stays as stored while the key id,
/// the endpoint URL and the region are the same.
type Where = (Option<String>, Option<String>, String);

fn keep_secret_key(new: &mut Option<String>, new_at: Where, old: &Option<String>, old_at: Where) {
    if new.as_deref().is_none_or(|s| s.is_empty() || s == REDACTED) && new_at == old_at {
        new.clone_from(old);
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
fn keep_password(new: &str, old: &str, field: &str) -> Result<String, Invalid> {
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
fn same_target(a: &str, b: &str) -> bool {
    let strip = |s: &str| {
        url::Url::parse(s).ok().map(|mut u| {
            let _ = u.set_password(None);
            u.to_string()
        })
    };
    strip(a).is_some() && strip(a) == strip(b)
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
        let shown = c.shown(false);
        assert!(!shown.to_string().contains("s3cret"), "{shown}");
        assert_eq!(shown["mandatory"], json!(true), "mandatory by default");
        assert!(!c.locator().contains("s3cret") && !c.locator().contains("app@"), "{}", c.locator());
        let back = c.patched(&json!({"uri": shown["uri"], "routingKey": "invoices"}), &open_guard()).unwrap();
        let Config::RabbitMq(r) = back else { panic!("kind changed") };
        assert_eq!(r.uri, "amqp://app:s3cret@127.0.0.1:5672/%2F");
        assert_eq!(r.routing_key, "invoices");
    }

    #[test]
    fn a_fifo_endpoints_header_values_are_hidden_when_names_only() {
        let c = Config::parse(
            "fifoEndpoint",
            json!({"url": "https://example.com/", "headers": {"X-Team": "ops", "Authorization": "Bearer s3cret"}}),
            &open_guard(),
        )
        .unwrap();
        assert_eq!(c.shown(false)["headers"], json!({"headers": {"X-Team": "ops"}, "sensitive": ["Authorization"]}));
        // Before, every value but the credential-like ones was shown to any reader.
        let hidden = c.shown(true);
        assert_eq!(hidden["headers"]["headers"], json!({}));
        assert!(!hidden.to_string().contains("ops"), "{hidden}");
    }

    #[test]
    fn a_postgres_password_is_never_shown_and_unknown_fields_are_refused() {
        let c = Config::parse(
            "postgres",
            json!({"url": "postgres://app@127.0.0.1:5432/db", "password": "pw", "tableName": "public.events"}),
            &open_guard(),
        )
        .unwrap();
        assert!(c.shown(false).get("password").is_none());
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
        let e = Config::parse("clickhouse", json!({}), &closed).unwrap_err();
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

    #[test]
    fn an_aws_destination_takes_its_region_from_its_queue_or_arn_and_keeps_its_secret_key_when_left_out() {
        let sqs = json!({"queueUrl": "https://sqs.eu-west-3.amazonaws.com/1/q", "accessKeyId": "AK", "secretAccessKey": "SK"});
        let c = Config::parse("sqs", sqs, &open_guard()).unwrap();
        let shown = c.shown(false);
        assert_eq!(shown["region"], json!("eu-west-3"));
        assert!(shown.get("secretAccessKey").is_none() && !shown.to_string().contains("SK\""), "{shown}");
        // Sent back as shown (no secret key): the stored one stays.
        let back = Config::parse_keeping("sqs", shown.clone(), &open_guard(), Some(&c)).unwrap();
        let Config::Sqs(q) = back else { panic!("kind changed") };
        assert_eq!(q.secret_access_key.as_deref(), Some("SK"));
        // Another key id without its secret: refused, the old secret is not carried over.
        let mut other = shown;
        other["accessKeyId"] = json!("AK2");
        assert!(Config::parse_keeping("sqs", other, &open_guard(), Some(&c)).is_err());

        let sns = json!({"topicArn": "arn:aws:sns:ap-south-1:1:t", "accessKeyId": "AK", "secretAccessKey": "SK"});
        let Config::Sns(t) = Config::parse("sns", sns, &open_guard()).unwrap() else { panic!() };
        assert_eq!(t.region(), "ap-south-1");
        let no_region = json!({"eventBusName": "bus", "accessKeyId": "AK", "secretAccessKey": "SK"});
        assert!(Config::parse("eventBridge", no_region, &open_guard()).unwrap_err().0.contains("region"));
        let role = json!({"eventBusName": "bus", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/r"});
        assert!(Config::parse("eventBridge", role, &open_guard()).unwrap_err().0.contains("roleArn"));
    }

    #[test]
    fn a_kept_secret_never_moves_to_another_host_user_or_database() {
        let stored = Config::parse(
            "rabbitMq",
            json!({"uri": "amqps://app:s3cret@127.0.0.1:5671/%2F", "routingKey": "q"}),
            &open_guard(),
        )
        .unwrap();
        for moved in [
            "amqp://app:%5Bredacted%5D@127.0.0.1:5671/%2F",
            "amqps://app:%5Bredacted%5D@127.0.0.2:5671/%2F",
            "amqps://other:%5Bredacted%5D@127.0.0.1:5671/%2F",
            "amqps://app:%5Bredacted%5D@127.0.0.1:5672/%2F",
            "amqps://app:%5Bredacted%5D@127.0.0.1:5671/other",
        ] {
            let e = stored.patched(&json!({"uri": moved}), &open_guard()).unwrap_err();
            assert!(e.0.contains("give the password again"), "{moved}: {e}");
        }
        let pg = Config::parse(
            "postgres",
            json!({"url": "postgres://app@127.0.0.1:5432/db", "password": "pw", "tableName": "t"}),
            &open_guard(),
        )
        .unwrap();
        let Config::Postgres(p) =
            pg.patched(&json!({"url": "postgres://app@127.0.0.2:5432/db"}), &open_guard()).unwrap()
        else {
            panic!("kind changed")
        };
        assert_eq!(p.password, None, "another host: the password is not carried over");
        let Config::Postgres(p) = pg.patched(&json!({"tableName": "u"}), &open_guard()).unwrap() else { panic!() };
        assert_eq!(p.password.as_deref(), Some("pw"), "the same database: it stays");
        let s3 = json!({"bucket": "b-1", "region": "us-east-1", "accessKeyId": "AK", "secretAccessKey": "SK",
                        "endpointUrl": "http://127.0.0.1:9000/"});
        let s3 = Config::parse("amazonS3", s3, &open_guard()).unwrap();
        assert!(s3.patched(&json!({"endpointUrl": "http://127.0.0.2:9000/"}), &open_guard()).is_err());
    }
}
