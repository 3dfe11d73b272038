//! What every operation of the generated OpenAPI document shares: the error body,
//! the authentication schemes, and the error answers each operation may give.
//! The gateway merges the routes' own descriptions and applies [`Shared`].

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, RefOr, ResponseBuilder};
use utoipa::{Modify, PartialSchema, ToSchema};

/// Every error answer: `code` names the failure, `detail` says what was wrong.
#[derive(serde::Serialize, ToSchema)]
#[allow(dead_code)] // the schema of `ApiError`'s body, written there by `json!`
pub struct Failure {
    /// A stable, machine-readable name of the failure (`validation`, `not_found`, …).
    code: String,
    /// What was wrong, in words.
    detail: String,
    /// A quota's name, when a quota refused.
    #[schema(nullable = false)]
    limit: Option<String>,
    /// The quota's value, when a quota refused.
    #[schema(nullable = false)]
    value: Option<i64>,
}

/// Applied once to the merged document: the bearer scheme every `/api` and
/// `/admin` route takes, and the error answers (4XX, 5XX: [`Failure`]) every
/// operation can give besides those it names.
pub struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.schemas.insert("Failure".into(), Failure::schema());
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        let failure = ResponseBuilder::new()
            .description("The request failed: `{code, detail}` says why.")
            .content("application/json", ContentBuilder::new().schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("Failure")))).build())
            .build();
        for item in doc.paths.paths.values_mut() {
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
                for status in ["4XX", "5XX"] {
                    op.responses.responses.entry(status.into()).or_insert_with(|| failure.clone().into());
                }
            }
        }
    }
}
