//! The tidy rule that every route the binary serves is described in its OpenAPI document.

use super::{report, rust_code, rust_files};

/// The route attributes of actix (`#[get("…")]` and its kin), bare or qualified.
const ROUTE_ATTRIBUTES: [&str; 8] = ["get(", "post(", "put(", "patch(", "delete(", "head(", "options(", "route("];

/// Ways to register a route past utoipa-actix-web (actix's own `ServiceConfig`,
/// app, scope, resource, route or redirect, a hand-made service factory, static
/// files), each allowed only as often as it is listed below.
const BYPASSES: [&str; 16] = [
    "web::ServiceConfig",
    "web::service(",
    "App::new(",
    ".into_app()",
    "web::scope(",
    "web::resource(",
    "Resource::new(",
    ".route(",
    "web::to(",
    "web::redirect(",
    "Redirect::new(",
    ".default_service(",
    "openapi_service(",
    "cfg.map(",
    "HttpServiceFactory for",
    "actix_files",
];

/// Words an import from actix may not hold: a rename (`get as fetch`), or an item
/// that registers routes, imported to be named bare (`scope(`, `ServiceConfig`). A
/// glob (`web::*`) is refused too.
const ACTIX_HIDING: [&str; 11] =
    ["as", "scope", "resource", "route", "to", "redirect", "service", "Scope", "Resource", "Route", "ServiceConfig"];

/// Where a bypass is deliberate, and how many times: the server's app (its
/// registrations go through utoipa until `.into_app()`, then the fallback answer
/// and the document's page), `/metrics` on its own listener, the app the document
/// is built from, the page (Swagger UI's files, not operations; the page is
/// described by hand), and the operational routes' second registration under
/// `/admin/v1`, which delegates both serving and describing to described handlers.
const ALLOWED_BYPASSES: [(&str, &str, usize); 7] = [
    ("crates/gateway/src/startup.rs", "App::new(", 2),
    ("crates/gateway/src/startup.rs", ".into_app()", 1),
    ("crates/gateway/src/startup.rs", "web::to(", 1),
    ("crates/gateway/src/startup.rs", ".default_service(", 1),
    ("crates/gateway/src/openapi.rs", "App::new(", 1),
    ("crates/gateway/src/openapi.rs", "web::scope(", 1),
    ("crates/api/src/v1/operational.rs", "HttpServiceFactory for", 1),
];

#[test]
fn every_route_is_described_in_the_openapi_document() {
    let mut problems = Vec::new();
    let mut bypasses = std::collections::HashMap::new();
    for (rel, src) in rust_files("crates") {
        if rel.starts_with("crates/bench") {
            continue;
        }
        let lines: Vec<&str> = src.lines().collect();
        // An import from actix under another name, or of a registering item by
        // itself, would hide a route attribute or a bypass from the spellings below.
        let mut import: Option<(usize, String)> = None;
        for (i, line) in lines.iter().enumerate() {
            let code = rust_code(line).trim_start();
            // Every `use` statement (`pub use`, `use ::actix_web`, `use {actix_web::…}`
            // alike), gathered to its `;`; one that names the crate `actix_web` is read.
            let opens = code.starts_with("use ") || (code.starts_with("pub") && code.contains(" use "));
            if opens || import.is_some() {
                let (at, text) = import.get_or_insert_with(|| (i, String::new()));
                text.push_str(code);
                text.push(' ');
                if code.contains(';') {
                    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric() && c != '_').collect();
                    let actix = words.contains(&"actix_web");
                    if actix && (text.contains('*') || words.iter().any(|w| ACTIX_HIDING.contains(w))) {
                        problems.push(format!("{rel}:{}: {}", *at + 1, text.trim()));
                    }
                    import = None;
                }
            }
            let attribute = code
                .strip_prefix("#[")
                .map(|a| a.strip_prefix("actix_web::").unwrap_or(a))
                .is_some_and(|a| ROUTE_ATTRIBUTES.iter().any(|r| a.starts_with(r)));
            if attribute {
                // The description sits right above the route, its attribute possibly
                // spread over several lines. `/metrics` is on its own listener, for
                // Prometheus, not an API operation.
                let described = lines[..i]
                    .iter()
                    .rev()
                    .take_while(|l| !l.trim().is_empty() && !l.trim_start().starts_with("async fn"))
                    .any(|l| l.trim_start().starts_with("#[utoipa::path"));
                let metrics = rel == "crates/gateway/src/health.rs" && code.contains("\"/metrics\"");
                if !described && !metrics {
                    problems.push(format!("{rel}:{}: {code}", i + 1));
                }
            }
            for bypass in BYPASSES.iter().filter(|b| code.contains(*b)) {
                let seen = bypasses.entry((rel.clone(), *bypass)).or_insert(0usize);
                *seen += 1;
                let allowed = ALLOWED_BYPASSES.iter().find(|(f, b, _)| *f == rel && b == bypass).map_or(0, |a| a.2);
                if *seen > allowed {
                    problems.push(format!("{rel}:{}: {code}", i + 1));
                }
            }
        }
    }
    report(
        "every route is registered through utoipa-actix-web and carries #[utoipa::path], so /openapi.json describes it",
        "put #[utoipa::path(...)] above the route attribute and register it with utoipa_actix_web's ServiceConfig",
        &problems,
    );
}
