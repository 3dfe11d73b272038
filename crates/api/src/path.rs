//! Path segments that are not ids, parsed at the edge like ids are: a value of
//! the wrong shape answers 422 naming it, and never reaches a query. (Ids and
//! id-or-uid references deserialise by parsing: see `hookgate_shared::ids`.)

use std::ops::Deref;

use hookgate_shared::ids::is_uid;
use serde::Deserialize;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// An event type's name in a path: Svix's uid charset, 1 to 256 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypeName(String);

impl Deref for EventTypeName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for EventTypeName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !is_uid(&s) {
            return Err(serde::de::Error::custom("an event type name is 1 to 256 of a-z A-Z 0-9 - _ ."));
        }
        Ok(EventTypeName(s))
    }
}

/// In the OpenAPI document: a string of Svix's uid charset.
impl PartialSchema for EventTypeName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(256))
            .pattern(Some(r"^[a-zA-Z0-9\-_.]+$"))
            .description(Some("An event type's name: 1 to 256 of a-z A-Z 0-9 - _ ."))
            .into()
    }
}

impl ToSchema for EventTypeName {}
