//! The OpenAPI document, generated from the routes themselves: every handler the
//! binary registers carries its description (`#[utoipa::path]`), and registering
//! goes through `utoipa-actix-web`, so a route cannot be served undescribed.
//! Served at `/openapi.json`, and readable at `/docs/` (Swagger UI, embedded in
//! the binary: no CDN).

use std::sync::OnceLock;

use actix_web::{get, HttpResponse};
use utoipa::openapi::{
    path::{HttpMethod, OperationBuilder, PathItem},
    ContentBuilder, InfoBuilder, ResponseBuilder,
};
use utoipa::Modify;
use utoipa_actix_web::{service_config::ServiceConfig, AppExt};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::{health, paths::PAGE, role::Role};

/// Every route of `role`, registered and described at once.
pub fn routes(cfg: &mut ServiceConfig, role: Role) {
    cfg.service(health::healthz).service(health::readyz).service(health::api_health).service(openapi);
    if role.serves_api() {
        hookgate_api::configure(cfg);
    }
    if role.serves_ingress() {
        hookgate_ingress::configure_receive(cfg);
    }
}

/// The page: Swagger UI reading `/openapi.json`.
pub fn page() -> SwaggerUi {
    // No validator badge: it would send the document to validator.swagger.io.
    SwaggerUi::new(format!("{PAGE}{{_:.*}}")).config(Config::from("/openapi.json").validator_url("none"))
}

/// The document of every role's routes, built once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let (_, mut doc) =
            actix_web::App::new().into_utoipa_app().configure(|cfg| routes(cfg, Role::All)).split_for_parts();
        doc.info = InfoBuilder::new()
            .title("Hookgate")
            .version(env!("CARGO_PKG_VERSION"))
            .description(Some(
                "A multi-tenant webhook gateway: the Svix-compatible send API (`/api/v1/app/…`), the Ingest API \
                 (`/ingest/api/v1`), Hookgate's own sources, search and usage, the operator's `/admin/v1`, and \
                 the providers' door (`/in/…`). Authenticate with `Authorization: Bearer <key>`: a tenant's API \
                 key, an app-portal token, or the operator's admin token for `/admin/v1`.",
            ))
            .build();
        doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new())]);
        let html = ResponseBuilder::new()
            .description("Swagger UI for this document")
            .content("text/html", ContentBuilder::new().build())
            .build();
        let op = OperationBuilder::new()
            .tag("Health")
            .operation_id(Some("hookgate.docs"))
            .summary(Some("This document, readable (Swagger UI, served by the binary)."))
            .security(utoipa::openapi::security::SecurityRequirement::default())
            .response("200", html)
            .build();
        doc.paths.paths.insert(PAGE.into(), PathItem::new(HttpMethod::Get, op));
        hookgate_api::openapi::Shared.modify(&mut doc);
        let mut json = serde_json::to_value(&doc).expect("the OpenAPI document serialises");
        any_of(&mut json);
        json.to_string()
    })
}

/// This document.
#[utoipa::path(
    tag = "Health",
    operation_id = "hookgate.openapi",
    security(()),
    responses((status = 200, content_type = "application/json", body = Object, description = "The OpenAPI 3.1 document"))
)]
#[get("/openapi.json")]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(document())
}

/// `oneOf` made `anyOf` (but where a discriminator picks one): serde reads an
/// untagged enum as the first variant that fits, so a body may fit more than one
/// (a replay's `data` is also valid "any" statistics), which `oneOf` forbids.
fn any_of(node: &mut serde_json::Value) {
    match node {
        serde_json::Value::Object(map) => {
            if !map.contains_key("discriminator") {
                if let Some(variants) = map.remove("oneOf") {
                    map.insert("anyOf".into(), variants);
                }
            }
            map.values_mut().for_each(any_of);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(any_of),
        _ => {}
    }
}
