//! How the shared wire types read in the generated OpenAPI document: ids and
//! id-or-uid references are strings (a [`Page`](crate::store::page::Page), Svix's
//! `ListResponse_*`, derives its own). Path parameters are described from the
//! route templates, in the API crate.

use std::borrow::Cow;

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use crate::ids::{
    ApiKeyId, AppId, AttemptId, EndpointId, InboundEventId, IntegrationId, MessageId, Prefixed, Ref, SourceId, TaskId,
    TenantId,
};

/// A string schema with a description.
fn string(description: String) -> RefOr<Schema> {
    RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).description(Some(description)).build()))
}

/// Each id type reads as a string naming its prefix.
macro_rules! id_schema {
    ($($name:ident),*) => {$(
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                string(format!("An id: `{}_` and a ULID.", $name::PREFIX))
            }
        }
        impl ToSchema for $name {}
    )*};
}

id_schema!(
    TenantId,
    ApiKeyId,
    AppId,
    EndpointId,
    MessageId,
    AttemptId,
    SourceId,
    InboundEventId,
    IntegrationId,
    TaskId
);

impl<T: Prefixed> utoipa::__dev::ComposeSchema for Ref<T> {
    fn compose(_: Vec<RefOr<Schema>>) -> RefOr<Schema> {
        string(format!("An id (`{}_…`) or a uid (1 to 256 of a-z A-Z 0-9 - _ .).", T::PREFIX))
    }
}

impl<T: Prefixed> ToSchema for Ref<T> {
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("{}Ref", T::NOUN))
    }
}
