//! What every operation of the generated OpenAPI document shares: the error body,
//! the authentication schemes, and the error answers each operation may give.
//! The gateway merges the routes' own descriptions and applies [`Shared`].

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, RefOr, Required, ResponseBuilder};
use utoipa::{Modify, PartialSchema, ToSchema};

/// Every error answer: `code` names the failure, `detail` says what was wrong.
#[derive(serde::Serialize, ToSchema)]
#[allow(dead_code)] // the schema of `ApiError`'s body, written there by `json!`
pub struct Failure {
    /// A stable, machine-readable name of the failure (`validation`, `not_found`, …).
    code: String,
    /// What was wrong: words, or for a body that does not parse, Svix's list of
    /// `{loc, msg, type}`.
    detail: Detail,
    /// A quota's name, when a quota refused.
    #[schema(nullable = false)]
    limit: Option<String>,
    /// The quota's value, when a quota refused.
    #[schema(nullable = false)]
    value: Option<i64>,
}

/// Svix's `EmptyResponse`: `{}`, where the SDK reads a body.
#[derive(serde::Serialize, ToSchema)]
pub(crate) struct EmptyResponse {}

/// A failure's `detail`.
#[derive(serde::Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum Detail {
    Text(String),
    Items(Vec<ValidationItem>),
}

/// One thing wrong with a request's body, as Svix's `ValidationError`.
#[derive(serde::Serialize, ToSchema)]
#[allow(dead_code)]
struct ValidationItem {
    /// Where: `["body", …]`.
    loc: Vec<String>,
    /// What, in words.
    msg: String,
    /// The kind of error (`value_error`).
    #[serde(rename = "type")]
    kind: String,
}

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
        let failure = ResponseBuilder::new()
            .description("The request failed: `{code, detail}` says why.")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("Failure"))))
                    .build(),
            )
            .build();
        let known: std::collections::HashSet<String> =
            components.schemas.keys().map(|k| format!("#/components/schemas/{k}")).collect();
        for (template, item) in doc.paths.paths.iter_mut() {
            let named: Vec<&str> =
                template.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}')).collect();
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
                &mut item.head,
                &mut item.options,
            ]
            .into_iter()
            .flatten()
            {
                // A path parameter the extractor did not describe (a single typed id, or
                // a tuple behind an alias) is described from the template.
                let params = op.parameters.get_or_insert_with(Vec::new);
                for name in &named {
                    // A generic id reference (`Ref<AppId>` in a tuple) is named but not
                    // collected as a component: it is a string.
                    for p in params.iter_mut() {
                        if let RefOr::T(p) = p {
                            if matches!(&p.schema, Some(RefOr::Ref(r)) if !known.contains(&r.ref_location)) {
                                p.schema = Some(String::schema());
                            }
                        }
                    }
                    let described = params.iter().any(|p| match p {
                        RefOr::T(p) => p.name == *name && p.parameter_in == ParameterIn::Path,
                        RefOr::Ref(_) => false,
                    });
                    if !described {
                        params.push(RefOr::T(path_parameter(name)));
                    }
                }
                for status in ["4XX", "5XX"] {
                    op.responses.responses.entry(status.into()).or_insert_with(|| failure.clone().into());
                }
                // OpenAPI requires a description on every answer: the status's own words
                // where the handler gave none.
                for (status, res) in op.responses.responses.iter_mut() {
                    if let RefOr::T(res) = res {
                        if res.description.is_empty() {
                            res.description = reason(status).into();
                        }
                    }
                }
            }
        }
    }
}

/// A path parameter described by its name alone: what kind of id it takes.
fn path_parameter(name: &str) -> Parameter {
    let what = match name {
        "app_id" => "The application's id (`app_…`) or uid.",
        "endpoint_id" => "The endpoint's id (`ep_…`) or uid.",
        "destination_id" | "sink_id" => "The destination's id (`ep_…`) or uid.",
        "msg_id" => "The message's id (`msg_…`) or its `eventId`.",
        "attempt_id" => "The attempt's id (`atmpt_…`).",
        "source_id" => "The source's id (`src_…`) or uid.",
        "tenant_id" => "The tenant's id (`tnt_…`) or uid.",
        "integ_id" => "The integration's id (`integ_…`).",
        "task_id" => "The background task's id (`qtask_…`).",
        "event_type_name" => "The event type's name.",
        "event_id" => "The inbound event's id (`evt_…`).",
        "key_id" => "The API key's id (`key_…`).",
        _ => "A path segment.",
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(what))
        .schema(Some(String::schema()))
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
