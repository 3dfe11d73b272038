//! What every operation of the generated OpenAPI document shares: the error body
//! (`Failure`, written by `ApiError`),
//! the authentication schemes, and the error answers each operation may give.
//! The gateway merges the routes' own descriptions and applies [`Shared`].

use hookgate_shared::http::Failure;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, RefOr, Required, ResponseBuilder};
use utoipa::{Modify, PartialSchema, ToSchema};

/// Svix's `EmptyResponse`: `{}`, where the SDK reads a body.
#[derive(serde::Serialize)]
pub(crate) struct EmptyResponse {}

/// `{}` and nothing else (a struct without fields would read as any object).
impl PartialSchema for EmptyResponse {
    fn schema() -> RefOr<Schema> {
        let none = AdditionalProperties::FreeForm(false);
        RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::Object).additional_properties(Some(none)).build(),
        ))
    }
}

impl ToSchema for EmptyResponse {}

/// Applied once to the merged document: the bearer scheme every `/api` and
/// `/admin` route takes, and the error answers (4XX, 5XX: [`Failure`]) every
/// operation can give besides those it names.
pub struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let mut schemas = Vec::new();
        <Failure as ToSchema>::schemas(&mut schemas);
        components.schemas.extend(schemas);
        components.schemas.insert("Failure".into(), Failure::schema());
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        // Every error answer carries a `Failure`.
        let failure_body =
            ContentBuilder::new().schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("Failure")))).build();
        let failure = ResponseBuilder::new()
            .description("The request failed: `{code, detail}` says why.")
            .content("application/json", failure_body.clone())
            .build();
        let too_many = ResponseBuilder::new()
            .description(
                "Over a quota of the tenant's (the body names it in `limit`) or a rate of Hookgate's own: \
                 retry after `Retry-After` seconds.",
            )
            .content("application/json", failure_body)
            .header("Retry-After", always(seconds_header("Whole seconds to wait before trying again, at least 1.")))
            .build();
        for (template, item) in doc.paths.paths.iter_mut() {
            let under = |scope: &str| template.strip_prefix(scope).is_some_and(|r| r.starts_with('/'));
            let keyed = crate::KEYED_SCOPES.iter().any(|s| under(s));
            // The tenant's API rate and message quota hold for a caller with a key under
            // `/api` and `/ingest` (not `/api/v1/health`, which is public and outside the
            // scope), its inbound rate at the providers' door.
            let scoped = under(crate::API) || under(crate::INGEST);
            for (op, post) in [
                (&mut item.get, false),
                (&mut item.put, false),
                (&mut item.post, true),
                (&mut item.delete, false),
                (&mut item.patch, false),
                (&mut item.head, false),
                (&mut item.options, false),
            ] {
                let Some(op) = op else { continue };
                // A POST the Idempotency-Key middleware keeps takes the key, and each of
                // its successes may be a replay.
                let replayable = post && keyed;
                let params = op.parameters.get_or_insert_with(Vec::new);
                describe_path(template, params);
                if replayable {
                    params.push(RefOr::T(idempotency_key()));
                }
                let keyed_caller = scoped && op.security.is_none();
                if keyed_caller || (post && template.starts_with("/in/")) {
                    op.responses.responses.insert("429".into(), too_many.clone().into());
                }
                for status in ["4XX", "5XX"] {
                    op.responses.responses.entry(status.into()).or_insert_with(|| failure.clone().into());
                }
                // OpenAPI requires a description on every answer: the status's own words
                // where the handler gave none. Every answer carries its request's id.
                for (status, res) in op.responses.responses.iter_mut() {
                    if let RefOr::T(res) = res {
                        if res.description.is_empty() {
                            res.description = reason(status).into();
                        }
                        res.headers.insert(
                            "X-Request-Id".into(),
                            RefOr::T(always(header("The request's id, as the logs name it."))),
                        );
                        if replayable && status.starts_with('2') {
                            res.headers.insert(
                                "Idempotent-Replayed".into(),
                                RefOr::T(header(
                                    "`true` when this is the kept answer to an earlier request with the same key.",
                                )),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Path parameters, described from the template alone and in its order: every
/// one is a string (an id, a uid or a name), whatever the extractor parses it
/// into, so the extractor's own description (absent behind a type alias or for a
/// single typed id, a generic reference for a tuple) is replaced.
fn describe_path(template: &str, params: &mut Vec<RefOr<Parameter>>) {
    params.retain(|p| !matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Path));
    let named = template.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'));
    let described: Vec<_> = named.map(|name| RefOr::T(path_parameter(template, name))).collect();
    params.splice(0..0, described);
}

/// A response header of a string value, sent when its description says.
fn header(what: &str) -> Header {
    HeaderBuilder::new().schema(Some(String::schema())).description(Some(what)).build()
}

/// A response header of a whole number of seconds, at least 1.
fn seconds_header(what: &str) -> Header {
    let seconds = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).build();
    HeaderBuilder::new().schema(Some(Schema::Object(seconds))).description(Some(what)).build()
}

/// The extension that marks a header as sent with every answer it is listed on.
/// utoipa's `Header` has no `required`; the gateway turns this mark into
/// `"required": true` as it serialises the document.
pub const ALWAYS_SENT: &str = "x-hookgate-always-sent";

/// `header`, marked as always sent.
fn always(mut header: Header) -> Header {
    header.extensions = Some(utoipa::openapi::extensions::ExtensionsBuilder::new().add(ALWAYS_SENT, true).build());
    header
}

/// `Idempotency-Key`, which every `POST` of the API takes (docs/guarantees.md).
fn idempotency_key() -> Parameter {
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes a retried POST safe: the first answer is kept (24 hours by default) and given again, \
             with `Idempotent-Replayed: true`, to a retry with the same key on the same path, whatever its body (as Svix), but for answers that \
             carry a credential (a portal token, an API key), which another body may not get (422); the same \
             key on another path answers 422, and while the first still runs, 409. Only 2xx answers are kept.",
        ))
        .schema(Some(String::schema()))
        .build()
}

/// A path parameter described by its name alone: what kind of id it takes.
fn path_parameter(template: &str, name: &str) -> Parameter {
    // A source is named by its uid on the Ingest API only; Hookgate's own source
    // routes and its door take the id.
    let source_by_uid = template.starts_with("/ingest/");
    let what = match name {
        "app_id" => "The application's id (`app_…`) or uid.",
        "endpoint_id" => "The endpoint's id (`ep_…`) or uid.",
        "destination_id" | "sink_id" => "The destination's id (`ep_…`) or uid.",
        "msg_id" => "The message's id (`msg_…`) or its `eventId`.",
        "attempt_id" => "The attempt's id (`atmpt_…`).",
        "source_id" if source_by_uid => "The source's id (`src_…`) or uid.",
        "source_id" => "The source's id (`src_…`).",
        "tenant_id" => "The tenant's id (`tnt_…`) or uid.",
        "integ_id" => "The integration's id (`integ_…`).",
        "task_id" => "The background task's id (`qtask_…`).",
        "event_type_name" => "The event type's name.",
        "event_id" => "The inbound event's id (`evt_…`).",
        "key_id" => "The API key's id (`key_…`).",
        _ => "A path segment.",
    };
    let schema = match name {
        "event_type_name" => crate::path::EventTypeName::schema(),
        _ => String::schema(),
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(what))
        .schema(Some(schema))
        .build()
}

/// The standard words for a status (`"200"` is "OK").
fn reason(status: &str) -> &'static str {
    status
        .parse::<u16>()
        .ok()
        .and_then(|s| actix_web::http::StatusCode::from_u16(s).ok())
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Success")
}
