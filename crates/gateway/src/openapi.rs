//! The OpenAPI document, generated from the routes themselves: every handler the
//! binary registers carries its description (`#[utoipa::path]`), and registering
//! goes through `utoipa-actix-web`, so a route cannot be served undescribed.
//! Served at `/openapi.json`, and readable at `/docs/` (Swagger UI, embedded in
//! the binary: no CDN).

use std::sync::OnceLock;

use actix_web::{dev::HttpServiceFactory, get, http::header, middleware::DefaultHeaders, web, HttpResponse};
use utoipa::openapi::{
    path::{HttpMethod, Operation, OperationBuilder, PathItem},
    ContentBuilder, InfoBuilder, ResponseBuilder,
};
use utoipa::Modify;
use utoipa_actix_web::{service_config::ServiceConfig, AppExt};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::{health, paths::PAGE, role::Role};

/// Every route of `role`, registered and described at once.
pub fn routes(cfg: &mut ServiceConfig, role: Role) {
    cfg.service(health::healthz)
        .service(health::readyz)
        .service(health::api_health)
        .service(health::api_ping)
        .service(openapi);
    if role.serves_api() {
        hookgate_api::configure(cfg);
        cfg.service(page_without_slash);
    }
    if role.serves_ingress() {
        hookgate_ingress::configure_receive(cfg);
    }
}

/// What the page may load: its own files and `/openapi.json`, nothing else
/// (Swagger UI sets styles inline, hence `'unsafe-inline'` for styles only).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The page: Swagger UI reading `/openapi.json`, under the same kind of headers
/// as the portal and the console (it shares their origin).
pub fn page() -> impl HttpServiceFactory {
    let headers = DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, PAGE_POLICY))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"));
    // No validator badge: it would send the document's address to validator.swagger.io.
    let ui = SwaggerUi::new("/{_:.*}").config(Config::from("/openapi.json").validator_url("none"));
    web::scope(PAGE.trim_end_matches('/')).wrap(headers).service(ui)
}

/// The document of `role`'s routes (what its `/openapi.json` serves), built once.
pub fn document(role: Role) -> &'static str {
    static ALL: OnceLock<String> = OnceLock::new();
    static API: OnceLock<String> = OnceLock::new();
    static INGRESS: OnceLock<String> = OnceLock::new();
    static WORKER: OnceLock<String> = OnceLock::new();
    let once = match role {
        Role::All => &ALL,
        Role::Api => &API,
        Role::Ingress => &INGRESS,
        Role::Worker => &WORKER,
    };
    once.get_or_init(|| {
        let (_, mut doc) = actix_web::App::new().into_utoipa_app().configure(|cfg| routes(cfg, role)).split_for_parts();
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
        if role.serves_api() {
            doc.paths.paths.insert(PAGE.into(), PathItem::new(HttpMethod::Get, page_operation()));
        }
        hookgate_api::openapi::Shared.modify(&mut doc);
        let mut json = serde_json::to_value(&doc).expect("the OpenAPI document serialises");
        any_of(&mut json);
        required_headers(&mut json);
        json.to_string()
    })
}

/// The page, described by hand: its files are Swagger UI's, not handlers.
fn page_operation() -> Operation {
    let html = ResponseBuilder::new()
        .description("Swagger UI for this document")
        .content("text/html", ContentBuilder::new().build())
        .build();
    OperationBuilder::new()
        .tag("Health")
        .operation_id(Some("hookgate.docs"))
        .summary(Some("This document, readable (Swagger UI, served by the binary)."))
        .security(utoipa::openapi::security::SecurityRequirement::default())
        .response("200", html)
        .build()
}

/// The page's address as people type it: sent on to `/docs/` (the page's own files
/// are addressed relative to it, so it must end in a slash).
#[utoipa::path(
    tag = "Health",
    operation_id = "hookgate.docs.redirect",
    security(()),
    responses((status = 308, description = "The page is at `/docs/`", headers(("Location" = String, description = "`/docs/`"))))
)]
#[get("/docs")]
pub async fn page_without_slash() -> HttpResponse {
    HttpResponse::PermanentRedirect().insert_header((header::LOCATION, PAGE)).finish()
}

/// This document: the routes this process's role serves.
#[utoipa::path(
    tag = "Health",
    operation_id = "hookgate.openapi",
    security(()),
    responses((status = 200, content_type = "application/json", body = Object, description = "The OpenAPI 3.1 document"))
)]
#[get("/openapi.json")]
pub async fn openapi(role: web::Data<Role>) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(document(**role))
}

/// `oneOf` made `anyOf` (but where a discriminator picks one): serde reads an
/// untagged enum as the first variant that fits, so a body may fit more than one,
/// which `oneOf` forbids.
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

/// A header marked as always sent (`hookgate_api::openapi::ALWAYS_SENT`) becomes
/// `"required": true`: a response header is optional unless it says so.
fn required_headers(node: &mut serde_json::Value) {
    match node {
        serde_json::Value::Object(map) => {
            if map.remove(hookgate_api::openapi::ALWAYS_SENT).is_some() {
                map.insert("required".into(), true.into());
            }
            map.values_mut().for_each(required_headers);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(required_headers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(role: Role) -> Vec<String> {
        let doc: serde_json::Value = serde_json::from_str(document(role)).expect("JSON");
        doc["paths"].as_object().expect("paths").keys().cloned().collect()
    }

    #[test]
    fn each_role_describes_the_routes_it_serves_and_no_others() {
        let all = paths(Role::All);
        let api = paths(Role::Api);
        let ingress = paths(Role::Ingress);
        let worker = paths(Role::Worker);
        for p in ["/api/v1/app", "/admin/v1/tenant", "/in/{source_id}", "/docs/", "/healthz"] {
            assert!(all.iter().any(|x| x == p), "all: {p}");
        }
        assert!(api.iter().any(|p| p == "/api/v1/app") && !api.iter().any(|p| p.starts_with("/in/")));
        assert!(
            ingress.iter().any(|p| p == "/in/{source_id}") && !ingress.iter().any(|p| p.starts_with("/api/v1/app"))
        );
        assert!(!ingress.iter().any(|p| p == "/docs/"), "the page is served where the API is");
        assert_eq!(worker, vec!["/api/v1/health", "/api/v1/health/ping", "/healthz", "/openapi.json", "/readyz"]);
    }
}
