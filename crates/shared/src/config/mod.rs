//! Configuration: a TOML file plus environment variables (the environment wins),
//! validated once at start into a typed [`Config`], with errors naming the setting.
//!
//! Every setting is listed once in [`SETTINGS`] with its file key, its environment
//! name and its default; `docs/configuration.md` is checked against that table.

use std::{collections::HashMap, net::SocketAddr, path::Path, time::Duration};

use ipnet::IpNet;

use crate::crypto::MasterKey;

mod raw;
mod smtp;
use raw::{parse_list, read_table, toml_to_string, Raw};
pub use smtp::{Smtp, SmtpTls};

/// One configuration setting: where it is read from and what it defaults to.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Key in the TOML file.
    pub key: &'static str,
    /// Environment variable; it overrides the file.
    pub env: &'static str,
    /// Default when neither is set; `None` means required or optional-unset.
    pub default: Option<&'static str>,
    pub help: &'static str,
}

macro_rules! settings {
    ($($key:literal, $env:literal, $default:expr, $help:literal;)*) => {
        /// Every setting Hookgate reads, in documentation order.
        pub const SETTINGS: &[Setting] = &[$(Setting { key: $key, env: $env, default: $default, help: $help }),*];
    };
}

settings! {
    "database_url", "DATABASE_URL", None, "Postgres connection string (required); TLS as libpq reads it: `sslmode`, `sslrootcert`, `sslcert`, `sslkey`.";
    "database_replica_url", "HOOKGATE_DATABASE_REPLICA_URL", None, "Streaming replicas of DATABASE_URL's database (one host or several, libpq style: each is checked and read on its own, in turn; TLS settings in its own query string, as DATABASE_URL's) for reads that tolerate staleness: message and attempt lists, the message search, statistics, health, usage, the console's figures and the audit log. Unset, every read is the primary's. A replica behind by more than HOOKGATE_REPLICA_MAX_LAG_MS, down, promoted or of another database is skipped for another, or the primary.";
    "replica_max_lag_ms", "HOOKGATE_REPLICA_MAX_LAG_MS", Some("5000"), "How far behind the primary the replica may be before its reads go to the primary instead (checked every second).";
    "redis_url", "REDIS_URL", None, "Redis URL (`redis://` or `rediss://` for TLS); with HOOKGATE_REDIS_CLUSTER one or more seed nodes, with HOOKGATE_REDIS_SENTINEL_MASTER one or more Sentinels, separated by commas and all of one scheme; unset runs without Redis (Postgres alone decides).";
    "redis_cluster", "HOOKGATE_REDIS_CLUSTER", Some("false"), "Talk to a Redis Cluster: REDIS_URL names seed nodes, keys carry the tenant as hash tag.";
    "redis_sentinel_master", "HOOKGATE_REDIS_SENTINEL_MASTER", None, "Find Redis through Redis Sentinel: REDIS_URL names one or more Sentinels (comma-separated), this is the name of the master they watch. The first URL's user, password and database are the master's.";
    "redis_sentinel_password", "HOOKGATE_REDIS_SENTINEL_PASSWORD", None, "The Sentinels' own password (their `requirepass`), if they have one; unset asks them without.";
    "redis_ca_file", "HOOKGATE_REDIS_CA_FILE", None, "A PEM file of roots trusted for `rediss://`, besides the system's.";
    "redis_prefix", "HOOKGATE_REDIS_PREFIX", Some("hg:"), "Prefix of every Redis key, so instances can share a Redis (no `{` or `}`: keys carry hash tags).";
    "redis_timeout_ms", "HOOKGATE_REDIS_TIMEOUT_MS", Some("250"), "Timeout of one Redis call; past it the call counts as an error and Postgres decides.";
    "listen", "HOOKGATE_LISTEN", Some("127.0.0.1:8080"), "Address to serve on.";
    "metrics_listen", "HOOKGATE_METRICS_LISTEN", Some(""), "Address of the /metrics listener, apart from the public ports (its labels name tenants and sources), e.g. 127.0.0.1:9464; empty (the default) serves no metrics.";
    "public_url", "HOOKGATE_PUBLIC_URL", None, "The address clients reach Hookgate at, such as https://hooks.example.com (a scheme and host, with a port if need be, and no path: Hookgate is served at the root of its host): the base of each source's `url` and of app-portal links. Unset, each is made from the request's scheme and host (a proxy's X-Forwarded-Host or Forwarded header only from `HOOKGATE_TRUSTED_PROXIES`).";
    "trusted_proxies", "HOOKGATE_TRUSTED_PROXIES", Some(""), "CIDRs of the proxies (an ingress controller, a load balancer) whose X-Forwarded-Host, X-Forwarded-Proto and Forwarded headers Hookgate believes when `HOOKGATE_PUBLIC_URL` is unset, comma-separated; from any other peer they are ignored and the request's Host header and scheme are used.";
    "admin_token", "HOOKGATE_ADMIN_TOKEN", None, "The operator's bearer token; unset disables /admin.";
    "master_key", "HOOKGATE_MASTER_KEY", None, "Base64 of 32 random bytes: root of the keys that encrypt stored secrets (required).";
    "transit_key", "HOOKGATE_TRANSIT_KEY", None, "Base64 of 32 random bytes: seals endpoint secrets and custom headers in an environment export, and opens them on import (give every installation a tenant moves between the same key). Unset, exports leave them out and imports of sealed ones are refused. Tenants never see it.";
    "default_signature_type", "HOOKGATE_DEFAULT_SIGNATURE_TYPE", Some("hmac256"), "The kind of signing secret an endpoint (or destination) gets when it is given none, Svix's `default_signature_type`: `hmac256` (a `whsec_` secret, signatures `v1,`) or `ed25519` (a `whsk_` key, signatures `v1a,`, whose `whpk_` public key `GET …/secret` shows). Existing secrets keep their kind.";
    "db_pool_size", "HOOKGATE_DB_POOL_SIZE", Some("16"), "Postgres connections per pool: a process has one pool, and one more for its delivery worker if it runs one.";
    "db_timeout_ms", "HOOKGATE_DB_TIMEOUT_MS", Some("5000"), "Timeout to connect to Postgres or wait for a pooled connection.";
    "db_statement_timeout_ms", "HOOKGATE_DB_STATEMENT_TIMEOUT_MS", Some("5000"), "Longest one database step may take: Postgres's statement_timeout, and Hookgate's own bound on waiting for an answer, so a stalled database answers 503 rather than hanging.";
    "paypal_cert_urls", "HOOKGATE_PAYPAL_CERT_URLS", Some("https://api.paypal.com/v1/notifications/certs/,https://api-m.paypal.com/v1/notifications/certs/"), "Where PayPal sources may fetch the certificate a `PAYPAL-CERT-URL` names: URL prefixes (scheme, host, port and path start), comma-separated; add https://api.sandbox.paypal.com/v1/notifications/certs/ for sandbox webhooks. A certificate elsewhere is refused without being fetched; fetched ones are cached for a day, and each process fetches at most 30 URLs it has not fetched before a minute.";
    "max_body", "HOOKGATE_MAX_BODY", Some("1048576"), "Largest request body accepted, in bytes.";
    "idempotency_ttl_secs", "HOOKGATE_IDEMPOTENCY_TTL_SECS", Some("86400"), "How long an Idempotency-Key is remembered.";
    "retention_inbound_days", "HOOKGATE_RETENTION_INBOUND_DAYS", Some("30"), "Days an inbound event is kept (its dedupe window), 1-90, for tenants and sources that set none.";
    "retention_message_days", "HOOKGATE_RETENTION_MESSAGE_DAYS", Some("90"), "Days a message is kept with its deliveries and attempts, 1-3650, for tenants that set none.";
    "partition_days", "HOOKGATE_PARTITION_DAYS", Some("7"), "Width in days (1-31) of the partitions of inbound events, messages, deliveries and attempts, widened when the longest retention would make more than about 32; a partition is dropped whole once its last day is past the longest retention in effect.";
    "partition_ahead_days", "HOOKGATE_PARTITION_AHEAD_DAYS", Some("7"), "Days (2-90) of partitions kept made ahead of time, so that a row never finds no partition for its day.";
    "archive_url", "HOOKGATE_ARCHIVE_URL", None, "Where a partition's rows are archived before it is dropped (JSON Lines, zstd, with a manifest): file:///absolute/dir or s3://bucket/prefix (credentials and endpoint from the standard AWS_* variables); unset archives nothing.";
    "prune_interval_secs", "HOOKGATE_PRUNE_INTERVAL_SECS", Some("60"), "How often the pruners look for rows past their retention.";
    "contract_grace_secs", "HOOKGATE_CONTRACT_GRACE_SECS", Some("300"), "How long no process of an older release must have been connected (as pg_stat_activity shows them) before a worker applies a pending contract migration, the last step of an upgrade.";
    "shutdown_timeout_secs", "HOOKGATE_SHUTDOWN_TIMEOUT_SECS", Some("30"), "How long in-flight requests may finish after SIGTERM.";
    "retry_schedule", "HOOKGATE_RETRY_SCHEDULE", Some("5,300,1800,7200,18000,36000,36000"), "Delays in seconds between delivery attempts.";
    "sync_lease_secs", "HOOKGATE_SYNC_LEASE_SECS", Some("60"), "Age after which a `processing` inbound event may be taken over.";
    "egress_allow_networks", "HOOKGATE_EGRESS_ALLOW_NETWORKS", Some(""), "CIDRs that every tenant's endpoints may resolve to despite the SSRF guard, comma-separated (a tenant's own `egressAllowNetworks`, set by the operator, opens a range to that tenant alone).";
    "egress_record_private_responses", "HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES", Some("false"), "Whether the body of a response from a private network that an allow-list opened (loopback, RFC 1918, …) is kept in the attempt log, where a tenant and its portal links read it; off, only its status is kept.";
    "egress_connect_timeout_secs", "HOOKGATE_EGRESS_CONNECT_TIMEOUT_SECS", Some("5"), "Connect timeout of one delivery.";
    "egress_timeout_secs", "HOOKGATE_EGRESS_TIMEOUT_SECS", Some("15"), "Total timeout of one delivery.";
    "egress_proxy", "HOOKGATE_EGRESS_PROXY", None, "An http:// or https:// proxy that every delivery goes through; unset, deliveries go direct and HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are ignored. The SSRF guard still checks every target.";
    "delivery_lease_secs", "HOOKGATE_DELIVERY_LEASE_SECS", Some("30"), "How long a claimed delivery is reserved for its worker; after it, another worker takes it (a FIFO endpoint too). Must be longer than the egress timeout; a FIFO endpoint's turn writes its result in what the lease leaves after the request, so leave it at least max(2 s, HOOKGATE_DB_TIMEOUT_MS) more (the start warns otherwise).";
    "max_endpoints_per_app", "HOOKGATE_MAX_ENDPOINTS_PER_APP", Some("100"), "Most endpoints one application may have (fan-out per message is bounded by it): the default of the `endpointsPerApp` quota (0: no limit).";
    "quota_api_requests_per_second", "HOOKGATE_QUOTA_API_REQUESTS_PER_SECOND", Some("0"), "Default quota: `/api/v1` requests per second per tenant (0: no limit). Each tenant may override every quota (`PATCH /admin/v1/tenant/{id}`, `quotas`).";
    "quota_messages_per_second", "HOOKGATE_QUOTA_MESSAGES_PER_SECOND", Some("0"), "Default quota: messages created per second per tenant through the API (0: no limit).";
    "quota_messages_per_day", "HOOKGATE_QUOTA_MESSAGES_PER_DAY", Some("0"), "Default quota: messages created per UTC day per tenant through the API (0: no limit); exact across instances (counted in Postgres).";
    "quota_inbound_per_second", "HOOKGATE_QUOTA_INBOUND_PER_SECOND", Some("0"), "Default quota: inbound events per second per tenant, over all its sources (0: no limit); over it a provider is answered 429 and retries.";
    "quota_apps_per_tenant", "HOOKGATE_QUOTA_APPS_PER_TENANT", Some("0"), "Default quota: applications per tenant (0: no limit).";
    "worker_concurrency", "HOOKGATE_WORKER_CONCURRENCY", Some("64"), "Deliveries in flight at once per worker process.";
    "worker_poll_ms", "HOOKGATE_WORKER_POLL_MS", Some("1000"), "How often a worker looks for due deliveries without a notification.";
    "fifo_sweep_secs", "HOOKGATE_FIFO_SWEEP_SECS", Some("10"), "How often each worker looks through the next 1000 FIFO progress rows (in key order round the table; the whole table at start) for ones left at rest with work waiting while their endpoint and tenant are enabled, and wakes them: a safety net (a process of the previous release enables without waking them). 0 turns it off.";
    "replay_batch", "HOOKGATE_REPLAY_BATCH", Some("500"), "Messages one step of a replay (a background task) looks at, 1-10000: a step is one transaction, and tasks take turns at each step.";
    "disable_after_secs", "HOOKGATE_DISABLE_AFTER_SECS", Some("432000"), "An endpoint failing without a success for this long is disabled (5 days).";
    "smtp_url", "HOOKGATE_SMTP_URL", None, "The SMTP server alert e-mails go through: `smtp://[user:password@]host[:port]` (STARTTLS, required; port 587 unless given), `smtps://…` (TLS from the start; port 465), or `smtp://…?tls=none` (no TLS: a relay on loopback only). User and password are percent-encoded and sent with AUTH (over TLS). Unset, no e-mail is sent; chat alerts still are. The server is the operator's, so the SSRF guard does not apply to it.";
    "smtp_ca_file", "HOOKGATE_SMTP_CA_FILE", None, "A PEM file of roots trusted for the SMTP server's certificate, besides the system's.";
    "alert_from", "HOOKGATE_ALERT_FROM", Some("Hookgate <hookgate@localhost>"), "The `From` of alert e-mails: an address, or `Name <address>`.";
    "metrics_tenant_label", "HOOKGATE_METRICS_TENANT_LABEL", Some("true"), "Label metrics by tenant; switch off for very many tenants.";
    "log_format", "HOOKGATE_LOG_FORMAT", Some("text"), "`text` or `json`.";
}

/// The output format of logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The validated configuration.
#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    /// Where reads that tolerate staleness go, when set (`crate::replica`).
    pub database_replica_url: Option<String>,
    pub replica_max_lag: Duration,
    pub redis_url: Option<String>,
    pub redis_cluster: bool,
    /// The master's name when Redis is found through Sentinel.
    pub redis_sentinel_master: Option<String>,
    pub redis_sentinel_password: Option<String>,
    pub redis_ca_file: Option<String>,
    pub redis_prefix: String,
    pub redis_timeout: Duration,
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub admin_token: Option<String>,
    pub master_key: MasterKey,
    /// Seals secrets in environment documents (`HOOKGATE_TRANSIT_KEY`).
    pub transit_key: Option<crate::crypto::TransitKey>,
    /// The kind of secret an endpoint gets when given none.
    pub default_signature_type: crate::endpoint_secret::SignatureType,
    pub db_pool_size: usize,
    pub db_timeout: Duration,
    pub db_statement_timeout: Duration,
    pub max_body: usize,
    pub idempotency_ttl: Duration,
    pub retention_inbound_days: i32,
    pub retention_message_days: i32,
    /// Width of a partition, and how far ahead partitions are made, in days.
    pub partition_days: i32,
    pub partition_ahead_days: i32,
    /// Where dropped partitions are archived first, if anywhere.
    pub archive_url: Option<String>,
    pub prune_interval: Duration,
    pub contract_grace: Duration,
    pub shutdown_timeout: Duration,
    pub retry_schedule: Vec<Duration>,
    pub sync_lease: Duration,
    pub egress_allow_networks: Vec<IpNet>,
    pub egress_record_private_responses: bool,
    /// Peers whose forwarded-host headers are believed (see `http::public_base`).
    pub trusted_proxies: Vec<IpNet>,
    pub egress_connect_timeout: Duration,
    pub egress_timeout: Duration,
    pub egress_proxy: Option<String>,
    /// `HOOKGATE_PUBLIC_URL` without a trailing `/`.
    pub public_url: Option<String>,
    /// URL prefixes PayPal certificates may be fetched from.
    pub paypal_cert_urls: Vec<String>,
    pub delivery_lease: Duration,
    pub max_endpoints_per_app: i64,
    /// The operator's default quotas (0: no limit).
    pub quotas: crate::quota::Quotas,
    pub worker_concurrency: usize,
    pub worker_poll: Duration,
    /// How often a worker's FIFO sweep steps; zero: never.
    pub fifo_sweep: Duration,
    pub replay_batch: i64,
    pub disable_after: Duration,
    /// Where alert e-mails go out, if anywhere.
    pub smtp: Option<Smtp>,
    pub metrics_tenant_label: bool,
    pub log_format: LogFormat,
}

impl std::fmt::Debug for Config {
    // Hand-written so that secrets never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("redis", &self.redis_url.is_some())
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// Why the configuration cannot be used; each names the setting and its env var.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{env} (`{key}`) is required but not set")]
    Missing { key: &'static str, env: &'static str },
    #[error("{env} (`{key}`) is invalid: {reason}")]
    Invalid { key: &'static str, env: &'static str, reason: String },
    #[error("cannot read config file {path}: {reason}")]
    File { path: String, reason: String },
}

/// What a FIFO endpoint's request leaves of the lease renewed right before it
/// at least (crates/egress/src/fifo.rs: the request is bounded by the egress
/// timeout and by the lease less this). The start refuses a lease not longer
/// than the egress timeout; in whole seconds, that is a lease at least this much
/// longer, so the request always gets its whole timeout.
pub const LEASE_MARGIN: Duration = Duration::from_secs(1);

impl Config {
    /// Loads from an optional TOML file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::from_sources(file, &env)
    }

    /// Loads from an optional TOML file and the given environment; tests use this.
    pub fn from_sources(file: Option<&Path>, env: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let table = match file {
            Some(path) => read_table(path)?,
            None => toml::Table::new(),
        };
        let mut raw = HashMap::new();
        for s in SETTINGS {
            let value = env
                .get(s.env)
                .cloned()
                .or_else(|| table.get(s.key).map(toml_to_string))
                .or_else(|| s.default.map(str::to_owned));
            if let Some(v) = value {
                raw.insert(s.key, v);
            }
        }
        if let Some(unknown) = table.keys().find(|k| !SETTINGS.iter().any(|s| s.key == *k)) {
            return Err(ConfigError::File {
                path: file.map(|p| p.display().to_string()).unwrap_or_default(),
                reason: format!("unknown setting `{unknown}`"),
            });
        }
        Self::validate(&Raw(raw))
    }

    fn validate(raw: &Raw) -> Result<Self, ConfigError> {
        let master_key = MasterKey::from_base64(raw.required("master_key")?)
            .map_err(|e| Raw::invalid("master_key", e.to_string()))?;
        let transit_key = match raw.get("transit_key") {
            Some(k) => Some(
                crate::crypto::TransitKey::from_base64(k).map_err(|e| Raw::invalid("transit_key", e.to_string()))?,
            ),
            None => None,
        };
        let database_url = raw.required("database_url")?.to_owned();
        // The TLS settings (`sslmode=verify-full`, `sslrootcert`, …) are read apart;
        // their files are checked when the pool is built.
        let (plain_url, _) =
            crate::db::tls::split(&database_url).map_err(|e| Raw::invalid("database_url", e.to_string()))?;
        plain_url.parse::<tokio_postgres::Config>().map_err(|e| Raw::invalid("database_url", e.to_string()))?;
        let database_replica_url = raw.get("database_replica_url").filter(|u| !u.is_empty()).map(str::to_owned);
        if let Some(url) = &database_replica_url {
            crate::replica::check_url(url).map_err(|e| Raw::invalid("database_replica_url", e))?;
        }
        let redis_url = raw.get("redis_url").map(str::to_owned);
        let redis_cluster: bool = raw.parse("redis_cluster")?;
        let redis_sentinel_master = raw.get("redis_sentinel_master").filter(|m| !m.is_empty()).map(str::to_owned);
        if redis_cluster && redis_sentinel_master.is_some() {
            return Err(Raw::invalid(
                "redis_sentinel_master",
                "a Redis Cluster has no Sentinel: set HOOKGATE_REDIS_CLUSTER or this, not both",
            ));
        }
        if let Some(url) = &redis_url {
            let many = redis_cluster || redis_sentinel_master.is_some();
            let seeds: Vec<&str> = if many { url.split(',').map(str::trim).collect() } else { vec![url] };
            let mut kinds = std::collections::BTreeSet::new();
            for seed in seeds {
                let client = ::redis::Client::open(seed).map_err(|e| Raw::invalid("redis_url", e.to_string()))?;
                kinds.insert(match client.get_connection_info().addr() {
                    ::redis::ConnectionAddr::TcpTls { insecure: true, .. } => "rediss:// with #insecure",
                    ::redis::ConnectionAddr::TcpTls { .. } => "rediss://",
                    _ => "redis://",
                });
            }
            // One TLS mode for every node: one URL's `#insecure` must not pass for all.
            if kinds.len() > 1 {
                let kinds: Vec<_> = kinds.into_iter().collect();
                return Err(Raw::invalid(
                    "redis_url",
                    format!("mixes {}: give every URL the same", kinds.join(" and ")),
                ));
            }
        }
        let redis_sentinel_password = raw.get("redis_sentinel_password").filter(|p| !p.is_empty()).map(str::to_owned);
        let redis_ca_file = raw.get("redis_ca_file").filter(|p| !p.is_empty()).map(str::to_owned);
        if let Some(path) = &redis_ca_file {
            std::fs::metadata(path).map_err(|e| Raw::invalid("redis_ca_file", format!("`{path}`: {e}")))?;
        }
        if raw.get("redis_prefix").is_some_and(|p| p.contains(['{', '}'])) {
            return Err(Raw::invalid("redis_prefix", "must not contain `{` or `}` (keys carry hash tags)"));
        }
        let admin_token = raw.get("admin_token").map(str::to_owned);
        if admin_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(Raw::invalid("admin_token", "must be at least 16 characters"));
        }
        let retry_schedule = parse_list(raw.get("retry_schedule").unwrap_or(""), |s| {
            s.parse::<u64>().map(Duration::from_secs).map_err(|e| e.to_string())
        })
        .map_err(|e| Raw::invalid("retry_schedule", e))?;
        let egress_allow_networks = parse_list(raw.get("egress_allow_networks").unwrap_or(""), |s| {
            s.parse::<IpNet>().map_err(|e| e.to_string())
        })
        .map_err(|e| Raw::invalid("egress_allow_networks", e))?;
        let trusted_proxies =
            parse_list(raw.get("trusted_proxies").unwrap_or(""), |s| s.parse::<IpNet>().map_err(|e| e.to_string()))
                .map_err(|e| Raw::invalid("trusted_proxies", e))?;
        let log_format = match raw.required("log_format")? {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(Raw::invalid("log_format", format!("`{other}`: expected text or json"))),
        };
        let db_pool_size: usize = raw.parse("db_pool_size")?;
        if db_pool_size == 0 {
            return Err(Raw::invalid("db_pool_size", "must be at least 1"));
        }
        let egress_timeout = raw.secs("egress_timeout_secs")?;
        let delivery_lease = raw.secs("delivery_lease_secs")?;
        // Checked together: a request must end before the lease lets another
        // worker take over. Whole seconds: longer is at least LEASE_MARGIN longer.
        if delivery_lease < egress_timeout + LEASE_MARGIN {
            return Err(Raw::invalid(
                "delivery_lease_secs",
                format!(
                    "{}s must be longer than HOOKGATE_EGRESS_TIMEOUT_SECS ({}s), or a slow delivery or FIFO batch \
                     would be sent twice",
                    delivery_lease.as_secs(),
                    egress_timeout.as_secs(),
                ),
            ));
        }
        let public_url = match raw.get("public_url").filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => {
                let parsed = url::Url::parse(p).ok().filter(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host().is_some()
                        && u.username().is_empty()
                        && u.password().is_none()
                        // The portal page finds its tenant and application at the
                        // start of the path, and its assets and the API at `/`.
                        && u.path() == "/"
                        && u[url::Position::AfterPath..].is_empty()
                });
                match parsed {
                    Some(u) => Some(u.as_str().trim_end_matches('/').to_owned()),
                    None => {
                        return Err(Raw::invalid(
                            "public_url",
                            "must be an http:// or https:// URL of a host alone (no path, user, password, query or fragment)",
                        ))
                    }
                }
            }
        };
        let mut paypal_cert_urls = Vec::new();
        for prefix in raw.get("paypal_cert_urls").unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let ok =
                url::Url::parse(prefix).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                return Err(Raw::invalid("paypal_cert_urls", format!("`{prefix}`: expected an http(s) URL prefix")));
            }
            paypal_cert_urls.push(prefix.to_owned());
        }
        let egress_proxy = raw.get("egress_proxy").filter(|p| !p.is_empty()).map(str::to_owned);
        if let Some(p) = &egress_proxy {
            let scheme_ok = p.starts_with("http://") || p.starts_with("https://");
            let host = p.split_once("://").map(|(_, rest)| rest.split(['/', ':']).next().unwrap_or(""));
            if !scheme_ok || host.is_none_or(str::is_empty) {
                return Err(Raw::invalid("egress_proxy", "must be an http:// or https:// URL with a host"));
            }
        }
        let days = |key: &'static str, max: i32| -> Result<i32, ConfigError> {
            let d: i32 = raw.parse(key)?;
            if !(1..=max).contains(&d) {
                return Err(Raw::invalid(key, format!("must be 1 to {max} days")));
            }
            Ok(d)
        };
        let retention_inbound_days = days("retention_inbound_days", 90)?;
        let retention_message_days = days("retention_message_days", 3650)?;
        let archive_url = raw.get("archive_url").filter(|u| !u.is_empty()).map(str::to_owned);
        if let Some(url) = &archive_url {
            if !(url.starts_with("file:///") || url.starts_with("s3://")) {
                return Err(Raw::invalid(
                    "archive_url",
                    format!("`{url}`: expected file:///absolute/dir or s3://bucket/prefix"),
                ));
            }
        }
        let partition_days = days("partition_days", 31)?;
        let partition_ahead_days = days("partition_ahead_days", 90)?;
        if partition_ahead_days < 2 {
            return Err(Raw::invalid("partition_ahead_days", "must be 2 to 90 days"));
        }
        let prune_interval = raw.secs("prune_interval_secs")?;
        let contract_grace = raw.secs("contract_grace_secs")?;
        if prune_interval.is_zero() {
            return Err(Raw::invalid("prune_interval_secs", "must be at least 1"));
        }
        let worker_concurrency: usize = raw.parse("worker_concurrency")?;
        if worker_concurrency == 0 {
            return Err(Raw::invalid("worker_concurrency", "must be at least 1"));
        }
        let replay_batch: i64 = raw.parse("replay_batch")?;
        if !(1..=10_000).contains(&replay_batch) {
            return Err(Raw::invalid("replay_batch", "must be 1-10000"));
        }
        Ok(Config {
            database_url,
            database_replica_url,
            replica_max_lag: raw.millis("replica_max_lag_ms")?,
            redis_url,
            redis_cluster,
            redis_sentinel_master,
            redis_sentinel_password,
            redis_ca_file,
            redis_prefix: raw.get("redis_prefix").unwrap_or("").to_owned(),
            redis_timeout: raw.millis("redis_timeout_ms")?,
            listen: raw.parse("listen")?,
            metrics_listen: match raw.get("metrics_listen") {
                Some("") | None => None,
                Some(_) => Some(raw.parse("metrics_listen")?),
            },
            admin_token,
            master_key,
            transit_key,
            default_signature_type: raw.parse("default_signature_type")?,
            db_pool_size,
            db_timeout: raw.millis("db_timeout_ms")?,
            db_statement_timeout: raw.millis("db_statement_timeout_ms")?,
            max_body: raw.parse("max_body")?,
            idempotency_ttl: raw.secs("idempotency_ttl_secs")?,
            retention_inbound_days,
            retention_message_days,
            partition_days,
            partition_ahead_days,
            archive_url,
            prune_interval,
            contract_grace,
            shutdown_timeout: raw.secs("shutdown_timeout_secs")?,
            retry_schedule,
            sync_lease: raw.secs("sync_lease_secs")?,
            egress_allow_networks,
            trusted_proxies,
            egress_record_private_responses: raw.parse("egress_record_private_responses")?,
            egress_connect_timeout: raw.secs("egress_connect_timeout_secs")?,
            egress_timeout,
            egress_proxy,
            public_url,
            paypal_cert_urls,
            delivery_lease,
            max_endpoints_per_app: raw.parse("max_endpoints_per_app")?,
            quotas: crate::quota::Quotas {
                api_requests_per_second: Some(raw.parse("quota_api_requests_per_second")?),
                messages_per_second: Some(raw.parse("quota_messages_per_second")?),
                messages_per_day: Some(raw.parse("quota_messages_per_day")?),
                inbound_per_second: Some(raw.parse("quota_inbound_per_second")?),
                endpoints_per_app: Some(raw.parse("max_endpoints_per_app")?),
                apps_per_tenant: Some(raw.parse("quota_apps_per_tenant")?),
            },
            worker_concurrency,
            worker_poll: raw.millis("worker_poll_ms")?,
            fifo_sweep: raw.secs("fifo_sweep_secs")?,
            replay_batch,
            disable_after: raw.secs("disable_after_secs")?,
            smtp: smtp::parse(raw)?,
            metrics_tenant_label: raw.parse("metrics_tenant_label")?,
            log_format,
        })
    }
}

#[cfg(test)]
mod tests;
