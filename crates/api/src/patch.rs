//! A PATCH field that tells "absent" from "null" from a value.

use serde::{Deserialize, Deserializer};

/// Use with `#[serde(default)]`: absent leaves a field alone, `null` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Maybe<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Maybe<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            Some(v) => Maybe::Value(v),
            None => Maybe::Null,
        })
    }
}

impl<T> Maybe<T> {
    /// `None` to leave alone, `Some(None)` to clear, `Some(Some(v))` to set.
    pub fn into_update(self) -> Option<Option<T>> {
        match self {
            Maybe::Absent => None,
            Maybe::Null => Some(None),
            Maybe::Value(v) => Some(Some(v)),
        }
    }

    pub fn value(&self) -> Option<&T> {
        match self {
            Maybe::Value(v) => Some(v),
            _ => None,
        }
    }
}

/// In the OpenAPI document a `Maybe<T>` is a nullable `T` (absent: not required).
/// (`ComposeSchema` is how utoipa describes a generic type it is given the
/// arguments of.)
impl<T: utoipa::PartialSchema> utoipa::__dev::ComposeSchema for Maybe<T> {
    fn compose(
        generics: Vec<utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>>,
    ) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let inner = generics.into_iter().next().unwrap_or_else(T::schema);
        utoipa::openapi::schema::OneOfBuilder::new()
            .item(utoipa::openapi::schema::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::Null))
            .item(inner)
            .into()
    }
}

impl<T: utoipa::ToSchema> utoipa::ToSchema for Maybe<T> {}

/// Use as `#[serde(default, deserialize_with = "crate::patch::null_as_default")]`
/// on a field a body may leave out: `null` reads as left out, as Svix reads it
/// (the official SDKs send `null` for every optional field a caller sets to
/// `None`).
pub fn null_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
