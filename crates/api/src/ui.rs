//! The web UI's pages and assets: the customer portal and the console, embedded
//! in the binary (no CDN, no build step) and served with a strict
//! `Content-Security-Policy`. The pages are shells: their scripts call the same
//! `/api/v1` and `/admin/v1` handlers as any client, with the credential in an
//! `Authorization` header, so there is no second path to the data and no cookie
//! to forge a request with.

use actix_web::{get, http::header, web, HttpResponse};
use hookgate_shared::{
    db,
    ids::TenantId,
    store::{portals, portals::PortalSettings},
    AppState,
};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(portal).service(console).service(asset);
}

/// What the pages may load: their own scripts, styles and API, nothing inline.
/// `frame-ancestors` is `'none'` but for a tenant's portal origins; `img-src`
/// adds the origin of the tenant's logo.
fn csp(frame_ancestors: &[String], logo_origin: Option<&str>) -> String {
    let ancestors = match frame_ancestors.is_empty() {
        true => "'none'".to_owned(),
        false => frame_ancestors.join(" "),
    };
    let img = logo_origin.map(|o| format!(" {o}")).unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:{img}; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
    )
}

fn page(html: String, csp: String, framable: bool) -> HttpResponse {
    let mut res = HttpResponse::Ok();
    res.content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, csp))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-store"));
    if !framable {
        res.insert_header((header::X_FRAME_OPTIONS, "DENY"));
    }
    res.body(html)
}

/// Escapes text for an HTML attribute value in double quotes.
fn attr(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;").replace('\'', "&#39;")
}

/// `GET /portal/{tenant}/{app}#key=…`: the customer portal. The token is in the
/// fragment, which the browser never sends: this page knows the tenant (for its
/// branding and framing origins) and nothing else, and answers the same page for
/// a tenant that does not exist.
#[utoipa::path(tag = "UI", operation_id = "hookgate.ui.portal", security(()), responses((status = 200, content_type = "text/html", body = String, description = "the portal's page")))]
#[get("/portal/{tenant}/{app}")]
async fn portal(state: web::Data<AppState>, path: web::Path<(String, String)>) -> HttpResponse {
    let settings = match TenantId::parse(&path.0) {
        // Anyone may ask for any tenant's page: the lookup waits its turn at the
        // pre-auth gate (busy, the page is served with the default branding).
        Ok(tenant) => db::bounded(
            state.db_budget(),
            state.pre_auth.run(async {
                let conn = db::conn(&state.db).await?;
                portals::get(&**conn, &tenant).await
            }),
        )
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "portal branding unavailable; serving the defaults");
            PortalSettings::default()
        }),
        Err(_) => PortalSettings::default(),
    };
    let logo_origin = settings.logo_url.as_deref().and_then(|u| url::Url::parse(u).ok()).map(|u| u.origin());
    let logo_origin = logo_origin.map(|o| o.ascii_serialization());
    let branding = serde_json::to_string(&settings).expect("settings serialise");
    let html = PORTAL_HTML.replace("{{branding}}", &attr(&branding));
    page(html, csp(&settings.frame_ancestors, logo_origin.as_deref()), !settings.frame_ancestors.is_empty())
}

/// `GET /console`: the operator's and the tenants' console; never framed.
#[utoipa::path(tag = "UI", operation_id = "hookgate.ui.console", security(()), responses((status = 200, content_type = "text/html", body = String, description = "the console's page")))]
#[get("/console")]
async fn console() -> HttpResponse {
    page(CONSOLE_HTML.to_owned(), csp(&[], None), false)
}

const PORTAL_HTML: &str = include_str!("../ui/portal.html");
const CONSOLE_HTML: &str = include_str!("../ui/console.html");

/// Every asset, by name: embedded at build time.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", "text/css; charset=utf-8", include_str!("../ui/app.css")),
    ("dom.js", "text/javascript; charset=utf-8", include_str!("../ui/dom.js")),
    ("chart.js", "text/javascript; charset=utf-8", include_str!("../ui/chart.js")),
    ("portal.js", "text/javascript; charset=utf-8", include_str!("../ui/portal.js")),
    ("portal_endpoints.js", "text/javascript; charset=utf-8", include_str!("../ui/portal_endpoints.js")),
    ("portal_activity.js", "text/javascript; charset=utf-8", include_str!("../ui/portal_activity.js")),
    ("portal_log.js", "text/javascript; charset=utf-8", include_str!("../ui/portal_log.js")),
    ("portal_catalog.js", "text/javascript; charset=utf-8", include_str!("../ui/portal_catalog.js")),
    ("transform.js", "text/javascript; charset=utf-8", include_str!("../ui/transform.js")),
    ("app_ctx.js", "text/javascript; charset=utf-8", include_str!("../ui/app_ctx.js")),
    ("console_operator.js", "text/javascript; charset=utf-8", include_str!("../ui/console_operator.js")),
    ("console_tenant.js", "text/javascript; charset=utf-8", include_str!("../ui/console_tenant.js")),
    ("console_audit.js", "text/javascript; charset=utf-8", include_str!("../ui/console_audit.js")),
    ("console_apps.js", "text/javascript; charset=utf-8", include_str!("../ui/console_apps.js")),
    ("console_more.js", "text/javascript; charset=utf-8", include_str!("../ui/console_more.js")),
    ("console.js", "text/javascript; charset=utf-8", include_str!("../ui/console.js")),
];

/// `GET /ui/{name}`: a stylesheet or script of the pages, embedded in the binary.
#[utoipa::path(tag = "UI", operation_id = "hookgate.ui.asset", security(()), responses((status = 200, description = "the asset", content((String = "text/css"), (String = "text/javascript")))))]
#[get("/ui/{name}")]
async fn asset(name: web::Path<String>) -> HttpResponse {
    match ASSETS.iter().find(|(n, _, _)| *n == name.as_str()) {
        Some((_, kind, body)) => HttpResponse::Ok()
            .content_type(*kind)
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .body(*body),
        None => HttpResponse::NotFound()
            .content_type("application/json")
            .body(r#"{"code":"not_found","detail":"no such UI asset"}"#),
    }
}

#[cfg(test)]
mod tests {
    use super::{attr, csp};

    #[test]
    fn the_policy_allows_framing_only_by_the_tenants_origins() {
        assert!(csp(&[], None).contains("frame-ancestors 'none'"));
        let p = csp(&["https://a.example".into(), "http://127.0.0.1:9".into()], Some("https://cdn.example"));
        assert!(p.ends_with("frame-ancestors https://a.example http://127.0.0.1:9"));
        assert!(p.contains("img-src 'self' data: https://cdn.example;"));
        assert!(p.contains("script-src 'self';") && !p.contains("unsafe"));
    }

    #[test]
    fn attribute_text_cannot_close_its_quotes() {
        assert_eq!(attr(r#"{"a":"</x>'&"}"#), "{&quot;a&quot;:&quot;&lt;/x&gt;&#39;&amp;&quot;}");
    }
}
