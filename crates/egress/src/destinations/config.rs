//! A destination's configuration: one of the kinds' own (each in its file, with
//! its behaviour: [`Kind`]), parsed and checked at the API's edge, sealed at rest
//! (it carries credentials), shown back with every credential redacted.
//!
//! The kinds are named once below (`kinds!`), each with the type that owns it;
//! a test holds that list to the kinds table of `hookgate_shared::status`.

use hookgate_shared::{
    ids::{AppId, EndpointId, TenantId},
    status::EndpointKind,
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::fifo::key_path;
pub use super::kind::{Invalid, REDACTED};
use super::{
    kind::{invalid, parsed, Kind},
    Failure, HandOver, Outbound,
};
use crate::ssrf::Guard;

/// [`Config`] from the kinds table (`hookgate_shared::endpoint_kind_table`): a
/// variant for each destination kind, holding the type (and file) that owns its
/// configuration and behaviour, which this enum only dispatches to.
macro_rules! kinds {
    (
        http: $http:ident = $http_code:literal, $http_delivery:ident;
        destinations: $($variant:ident = $code:literal, $name:literal, $delivery:ident, $module:ident :: $ty:ident;)*
    ) => {
        $(pub use super::$module::$ty;)*

        // Each kind's own `KIND` is its row's: checked as the crate compiles.
        $(const _: () = assert!(<$ty as Kind>::KIND as i16 == EndpointKind::$variant as i16);)*

        /// A destination's configuration, of one of the kinds Hookgate publishes to.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Config {
            $($variant($ty),)*
        }

        impl Config {
            /// The kinds, in this list's order.
            pub const KINDS: &'static [EndpointKind] = &[$(<$ty as Kind>::KIND),*];

            pub fn kind(&self) -> EndpointKind {
                match self {
                    $(Config::$variant(_) => <$ty as Kind>::KIND,)*
                }
            }

            /// A configuration of `kind` from its `config` object, unchecked;
            /// `None` for a kind that is not a destination.
            fn of_kind(kind: EndpointKind, config: Value) -> Option<Result<Config, Invalid>> {
                $(if kind == <$ty as Kind>::KIND {
                    return Some(parsed::<$ty>(config).map(Config::$variant));
                })*
                None
            }

            fn check(&self, guard: &Guard) -> Result<(), Invalid> {
                match self {
                    $(Config::$variant(c) => c.check(guard),)*
                }
            }

            /// Where it delivers, with no credential: what the attempt log and the
            /// console show in place of an endpoint's URL.
            pub fn locator(&self) -> String {
                match self {
                    $(Config::$variant(c) => c.locator(),)*
                }
            }

            /// The configuration as the API shows it: credentials replaced by
            /// `[redacted]`, a password field left out (Svix's `…ConfigOut`).
            /// `names_only`: a FIFO endpoint's headers by name only, every one of
            /// them (a portal link not shown header values, as `…/headers` answers it).
            pub fn shown(&self, names_only: bool) -> Value {
                match self {
                    $(Config::$variant(c) => c.shown(names_only),)*
                }
            }

            /// The hosts and ports a hand-over dials, with the field that names each.
            pub fn dialled(&self) -> Vec<(&'static str, String, u16)> {
                match self {
                    $(Config::$variant(c) => c.dialled(),)*
                }
            }

            /// The stored secrets of `stored` kept where this one, of the same
            /// kind, carries them redacted or leaves them out ([`Kind::keep_redacted`]).
            fn keep_redacted(&mut self, stored: &Config) -> Result<(), Invalid> {
                match (self, stored) {
                    $((Config::$variant(new), Config::$variant(old)) => new.keep_redacted(old),)*
                    // Of another kind: nothing of it is this one's to keep.
                    _ => Ok(()),
                }
            }

            pub(super) async fn publish(&self, at: &HandOver<'_>, out: &Outbound<'_>) -> Result<String, Failure> {
                match self {
                    $(Config::$variant(c) => c.publish(at, out).await,)*
                }
            }

        }

        /// Stored (sealed) and compared as `{"type": …, "config": {…}}`, the API's
        /// shape, each kind's fields in their declared order (as a derive wrote them).
        impl Serialize for Config {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut out = s.serialize_struct("Config", 2)?;
                out.serialize_field("type", self.kind().type_name().unwrap_or_default())?;
                match self {
                    $(Config::$variant(c) => out.serialize_field("config", c)?,)*
                }
                out.end()
            }
        }
    };
}

hookgate_shared::endpoint_kind_table!(kinds);

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = Stored::deserialize(d)?;
        let kind = EndpointKind::from_type_name(&stored.kind)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown destination type `{}`", stored.kind)))?;
        Config::of_kind(kind, stored.config)
            .ok_or_else(|| serde::de::Error::custom(format!("`{}` is not a destination type", stored.kind)))?
            .map_err(|e| serde::de::Error::custom(e.0))
    }
}

#[derive(Deserialize)]
struct Stored {
    #[serde(rename = "type")]
    kind: String,
    config: Value,
}

fn not_served(kind: &str) -> Invalid {
    let served: Vec<&str> = Config::KINDS.iter().filter_map(|k| k.type_name()).collect();
    let (last, rest) = served.split_last().expect("Hookgate serves some kinds");
    invalid(format!(
        "destinations of type `{kind}` are not served by Hookgate; the types served are {} and {last}",
        rest.join(", ")
    ))
}

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
        let parsed = EndpointKind::from_type_name(kind).and_then(|k| Config::of_kind(k, config));
        let mut c = match parsed {
            Some(c) => c?,
            None if NOT_SERVED.contains(&kind) => return Err(not_served(kind)),
            None => return Err(invalid(format!("`type` `{kind}` is not a destination type"))),
        };
        if let Some(stored) = stored {
            c.keep_redacted(stored)?;
        }
        c.check(guard)?;
        Ok(c)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn open_guard() -> Guard {
        Guard::new(vec!["127.0.0.0/8".parse().unwrap()])
    }

    #[test]
    fn every_destination_kind_of_the_kinds_table_has_its_type_here_once() {
        let table: Vec<EndpointKind> = EndpointKind::ALL.iter().copied().filter(|k| k.is_destination()).collect();
        assert_eq!(Config::KINDS, table.as_slice(), "the kinds here, in the table's order");
        for &k in Config::KINDS {
            let name = k.type_name().expect("a destination has a type name");
            let stored = json!({"type": name, "config": {}});
            // Each parses as itself (or says what its own config lacks), never as another.
            match serde_json::from_value::<Config>(stored) {
                Ok(c) => assert_eq!(c.kind(), k),
                Err(e) => assert!(e.to_string().contains(name) || e.to_string().contains("missing field"), "{e}"),
            }
        }
    }

    #[test]
    fn a_stored_configuration_reads_back_as_it_was_sealed() {
        let c = Config::parse(
            "rabbitMq",
            json!({"uri": "amqp://app:s3cret@127.0.0.1:5672/%2F", "routingKey": "orders"}),
            &open_guard(),
        )
        .unwrap();
        // Byte for byte what the derive of the release before wrote: its processes read it.
        let text = serde_json::to_string(&c).unwrap();
        let before = r#"{"type":"rabbitMq","config":{"uri":"amqp://app:s3cret@127.0.0.1:5672/%2F","routingKey":"orders","mandatory":true}}"#;
        assert_eq!(text, before);
        assert_eq!(serde_json::from_str::<Config>(&text).unwrap(), c);
        // An AWS kind: its own fields, then the ones every AWS destination has.
        let sqs = json!({"queueUrl": "https://sqs.eu-west-3.amazonaws.com/1/q", "accessKeyId": "AK",
                         "secretAccessKey": "SK", "region": "eu-west-3"});
        let text = serde_json::to_string(&Config::parse("sqs", sqs, &open_guard()).unwrap()).unwrap();
        let before = r#"{"type":"sqs","config":{"queueUrl":"https://sqs.eu-west-3.amazonaws.com/1/q","region":"eu-west-3","accessKeyId":"AK","secretAccessKey":"SK"}}"#;
        assert_eq!(text, before);
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
        assert!(e.0.contains("not served") && e.0.contains("rabbitMq, postgres, sqs"), "{e}");
        // Every kind served is named, the last after "and".
        let last = Config::KINDS.last().and_then(|k| k.type_name()).unwrap();
        assert!(e.0.ends_with(&format!(" and {last}")), "{e}");
        assert!(Config::KINDS.iter().filter_map(|k| k.type_name()).all(|name| e.0.contains(name)), "{e}");
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
