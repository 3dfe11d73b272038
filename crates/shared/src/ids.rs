//! Prefixed, time-sortable identifiers (`tnt_…`, `app_…`, `msg_…`), parsed at the edge.
//!
//! The body is a ULID (48-bit millisecond timestamp + 80 random bits, Crockford
//! base32), so ids sort by creation time. Pagination iterators rely on that.

use std::fmt;

use ulid::Ulid;

/// A prefix plus a ULID; the prefix says what kind of thing the id names.
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id, sortable after every id made before it in this millisecond's past.
            pub fn generate() -> Self {
                Self(format!("{}_{}", $prefix, Ulid::new()))
            }

            /// An id as one made at `at` would be (tests and backfills write rows
            /// of the past; partitions are chosen by the time in the id).
            pub fn generated_at(at: chrono::DateTime<chrono::Utc>) -> Self {
                let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
                Self(format!("{}_{}", $prefix, Ulid::from_parts(ms, rand::random())))
            }

            /// The id `seed` maps to, the same on every call: `ms` its time part,
            /// a hash of `seed` the rest (an import maps ids it cannot keep so,
            /// and a second run finds what the first made).
            pub fn derived(ms: u64, seed: &str) -> Self {
                Self(format!("{}_{}", $prefix, derived_ulid(ms, seed)))
            }

            /// When the id was made, in milliseconds since the epoch (the ULID's
            /// time part); `None` if it does not hold a ULID (never, once parsed).
            pub fn millis(&self) -> Option<u64> {
                let body = self.0.strip_prefix($prefix)?.strip_prefix('_')?;
                Ulid::from_string(body).ok().map(|u| u.timestamp_ms())
            }

            /// Parses an id, checking the prefix and the ULID body.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_prefixed(s, $prefix).map(|_| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Wraps a value read back from the database, where it was stored valid.
            pub fn from_db(s: String) -> Self {
                Self(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Prefixed for $name {
            const NOUN: &'static str = stringify!($name);
            const PREFIX: &'static str = $prefix;

            fn parse(s: &str) -> Result<Self, IdError> {
                $name::parse(s)
            }
        }

        /// Deserialising is parsing: a path or body id of the wrong shape is refused
        /// here, with words that name the expected prefix.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&s).map_err(|e| serde::de::Error::custom(format!("`{}`: {e}", shown(&s))))
            }
        }
    };
}

/// What every prefixed id type can do, for code generic over them ([`Ref`]).
pub trait Prefixed: Sized + AsRef<str> {
    const NOUN: &'static str;
    /// The prefix before the `_` (`app` for `app_…`).
    const PREFIX: &'static str;
    fn parse(s: &str) -> Result<Self, IdError>;
}

/// The lowest id of `prefix` made at `at`: that millisecond's ULID with no
/// randomness. Partition bounds are such ids (the database has the same function,
/// `hookgate_id_floor`, tested against this one).
pub fn floor(prefix: &str, at: chrono::DateTime<chrono::Utc>) -> String {
    let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    format!("{prefix}_{}", Ulid::from_parts(ms, 0))
}

/// The instant an id was made at, read from its ULID; `None` if it is no id.
pub fn made_at(id: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let (_, body) = id.split_once('_')?;
    let ms = Ulid::from_string(body).ok()?.timestamp_ms();
    chrono::DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
}

/// Whether `s` is shaped like an id of `prefix` (`app_…`), well-formed or not.
fn looks_like(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('_'))
}

/// A value shown back in an error: printable, and short.
fn shown(s: &str) -> String {
    s.chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// Svix's `uid` pattern: 1 to 256 of `a-z A-Z 0-9 - _ .`.
pub fn is_uid(s: &str) -> bool {
    (1..=256).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Checks a tenant's `uid`: a `uid`, and not one that reads as a tenant id (the
/// admin paths take either). The one check the admin API and the CLI share.
pub fn check_tenant_uid(uid: &str) -> Result<(), String> {
    if is_uid(uid) && !uid.starts_with("tnt_") {
        return Ok(());
    }
    Err("`uid` must be 1 to 256 of a-z A-Z 0-9 - _ . and must not start with `tnt_`".into())
}

/// Checks a tenant's `name`.
pub fn check_tenant_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() || name.len() > 256 {
        return Err("`name` must be 1 to 256 characters".into());
    }
    Ok(())
}

/// A row named in a path by its id or by its `uid`, as Svix paths accept either.
/// Parsed at the edge: anything that is neither never reaches a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref<T> {
    Id(T),
    Uid(String),
}

impl<T: Prefixed> Ref<T> {
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Ok(id) = T::parse(s) {
            return Ok(Ref::Id(id));
        }
        if is_uid(s) {
            return Ok(Ref::Uid(s.to_owned()));
        }
        Err(format!("`{}` is neither an id nor a uid (1 to 256 of a-z A-Z 0-9 - _ .)", shown(s)))
    }

    /// The uid under which a row this path names may be created (`PUT`, an inline
    /// application): a uid that does not look like an id of this kind, since ids
    /// are only ever generated. `None` for an id, or for `app_nope` and the like.
    pub fn creatable_uid(&self) -> Option<&str> {
        match self {
            Ref::Uid(uid) if !looks_like(uid, T::PREFIX) => Some(uid),
            _ => None,
        }
    }

    /// The value a query compares with both the id and the uid column.
    pub fn as_str(&self) -> &str {
        match self {
            Ref::Id(id) => id.as_ref(),
            Ref::Uid(uid) => uid,
        }
    }
}

impl<T: Prefixed> fmt::Display for Ref<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de, T: Prefixed> serde::Deserialize<'de> for Ref<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ref::parse(&s).map_err(serde::de::Error::custom)
    }
}

prefixed_id!(/// A tenant: one client of the operating agency.
    TenantId, "tnt");
prefixed_id!(/// One API key of a tenant; the key itself is never stored.
    ApiKeyId, "key");
prefixed_id!(/// A Svix-style application.
    AppId, "app");
prefixed_id!(/// An endpoint of an application.
    EndpointId, "ep");
prefixed_id!(/// A message published by a tenant.
    MessageId, "msg");
prefixed_id!(/// One delivery attempt of a message to an endpoint.
    AttemptId, "atmpt");
prefixed_id!(/// An ingress source.
    SourceId, "src");
prefixed_id!(/// An inbound event admitted by a source.
    InboundEventId, "evt");
prefixed_id!(/// An application's integration: a named key for a customer's third-party tool.
    IntegrationId, "integ");
prefixed_id!(/// A background task (an endpoint's replay), run by the workers in steps.
    TaskId, "qtask");
prefixed_id!(/// An entry of a tenant's audit log: one action of the operator or the tenant.
    AuditId, "aud");
prefixed_id!(/// A broker source: a queue or stream the workers consume into messages.
    BrokerSourceId, "bsrc");

/// A ULID made at `ms` from 80 bits of `seed`'s SHA-256: [`AppId::derived`] and its kin.
fn derived_ulid(ms: u64, seed: &str) -> Ulid {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(seed.as_bytes());
    let random = u128::from_be_bytes(hash[..16].try_into().expect("16 bytes")) >> 48;
    Ulid::from_parts(ms, random)
}

/// Why a string is not an id of the expected kind.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdError {
    #[error("expected an id starting with `{expected}_`")]
    WrongPrefix { expected: &'static str },
    #[error("the part after `{prefix}_` is not a valid id")]
    BadBody { prefix: &'static str },
}

fn parse_prefixed(s: &str, prefix: &'static str) -> Result<Ulid, IdError> {
    let body = s
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .ok_or(IdError::WrongPrefix { expected: prefix })?;
    Ulid::from_string(body).map_err(|_| IdError::BadBody { prefix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_carry_their_prefix_and_parse_back() {
        let id = TenantId::generate();
        assert!(id.as_str().starts_with("tnt_"), "{id}");
        assert_eq!(TenantId::parse(id.as_str()).unwrap(), id);
    }

    #[test]
    fn ids_made_later_sort_after_earlier_ones() {
        let a = MessageId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = MessageId::generate();
        assert!(a < b, "{a} should sort before {b}");
    }

    #[test]
    fn a_reference_is_an_id_a_uid_or_refused() {
        let app = AppId::generate();
        assert_eq!(Ref::<AppId>::parse(app.as_str()), Ok(Ref::Id(app.clone())));
        assert_eq!(Ref::<AppId>::parse("my-app.1"), Ok(Ref::Uid("my-app.1".into())));
        assert!(Ref::<AppId>::parse("a\0b").is_err());
        assert!(Ref::<AppId>::parse("").is_err());
        assert!(Ref::<AppId>::parse(&"x".repeat(257)).is_err());
        assert_eq!(Ref::<AppId>::parse("apple").unwrap().creatable_uid(), Some("apple"));
        assert_eq!(Ref::<AppId>::parse("app_nope").unwrap().creatable_uid(), None);
        assert_eq!(Ref::<AppId>::parse(app.as_str()).unwrap().creatable_uid(), None);
        let e = serde_json::from_str::<AppId>("\"ep_1\"").unwrap_err().to_string();
        assert!(e.contains("app_"), "{e}");
    }

    #[test]
    fn an_ids_floor_sorts_below_every_id_of_its_instant_and_above_the_ones_before() {
        let at = chrono::DateTime::from_timestamp_millis(1_764_720_000_000).unwrap();
        let floor = floor("msg", at);
        assert_eq!(floor.len(), "msg_".len() + 26);
        assert!(floor.ends_with("0000000000000000"), "{floor}");
        for _ in 0..100 {
            let same = MessageId::generated_at(at);
            assert!(floor.as_str() <= same.as_str(), "{floor} <= {same}");
            let before = MessageId::generated_at(at - chrono::Duration::milliseconds(1));
            assert!(before.as_str() < floor.as_str(), "{before} < {floor}");
        }
        assert_eq!(made_at(&floor), Some(at));
        assert_eq!(made_at("msg_nope"), None);
    }

    #[test]
    fn an_id_of_another_kind_is_refused_by_its_prefix() {
        let app = AppId::generate();
        assert_eq!(TenantId::parse(app.as_str()), Err(IdError::WrongPrefix { expected: "tnt" }));
        assert_eq!(TenantId::parse("tnt_nope"), Err(IdError::BadBody { prefix: "tnt" }));
        assert!(TenantId::parse("tnt").is_err());
    }
}
