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
    };
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
    fn an_id_of_another_kind_is_refused_by_its_prefix() {
        let app = AppId::generate();
        assert_eq!(TenantId::parse(app.as_str()), Err(IdError::WrongPrefix { expected: "tnt" }));
        assert_eq!(TenantId::parse("tnt_nope"), Err(IdError::BadBody { prefix: "tnt" }));
        assert!(TenantId::parse("tnt").is_err());
    }
}
