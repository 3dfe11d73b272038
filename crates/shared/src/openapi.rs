//! How the shared wire types read in the generated OpenAPI document: ids and
//! id-or-uid references are strings, a [`Page`] is Svix's `ListResponse_*`, and a
//! path naming one row is one parameter named as the routes name it.

use std::borrow::Cow;

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, Required};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use crate::ids::{
    ApiKeyId, AppId, AttemptId, EndpointId, InboundEventId, IntegrationId, MessageId, Prefixed, Ref, SourceId, TaskId,
    TenantId,
};

/// A string schema with a description.
fn string(description: String) -> RefOr<Schema> {
    RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).description(Some(description)).build()))
}

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

/// One required path parameter.
fn path_param(name: &str, schema: RefOr<Schema>, provider: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
    vec![ParameterBuilder::new()
        .name(name)
        .required(Required::True)
        .parameter_in(provider().unwrap_or(ParameterIn::Path))
        .schema(Some(schema))
        .build()]
}

/// `web::Path<X>` of one value reads as one parameter; its name is the one every
/// route gives it (`{app_id}`, `{source_id}`, …).
macro_rules! path_of_one {
    ($($ty:ty => $name:literal),*) => {$(
        impl IntoParams for $ty {
            fn into_params(provider: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                path_param($name, <$ty as PartialSchema>::schema(), provider)
            }
        }
    )*};
}

path_of_one!(
    Ref<AppId> => "app_id",
    Ref<TenantId> => "tenant_id",
    Ref<SourceId> => "source_id",
    Ref<EndpointId> => "endpoint_id",
    SourceId => "source_id",
    TaskId => "task_id"
);
