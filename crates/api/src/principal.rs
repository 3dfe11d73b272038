//! Who a request acts for, set by the auth middleware and read by extractors.

use std::future::{ready, Ready};

use actix_web::{dev::Payload, FromRequest, HttpMessage, HttpRequest};

use hookgate_shared::http::ApiError;
use hookgate_shared::ids::{ApiKeyId, TenantId};

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The agency, with the admin token.
    Operator,
    /// A tenant, with one of its API keys.
    Tenant { tenant: TenantId, key: ApiKeyId },
    /// The operator reading a tenant's data (the admin token and a
    /// `Hookgate-Tenant` header): `GET`s only, never a secret, each one audited.
    Inspector { tenant: TenantId },
    /// A tenant's customer, with an app-portal token for one application.
    Portal {
        tenant: TenantId,
        app_id: String,
        app_uid: Option<String>,
        feature_flags: Vec<String>,
        read_only: bool,
        /// A message token: it may create messages in its application, nothing else.
        message_only: bool,
        /// A poller token: it may poll this polling endpoint (its id) while this
        /// generation of its token lives, nothing else.
        poller: Option<(String, i32)>,
        /// The token's id ([`portal_token_id`](hookgate_shared::crypto::portal_token_id)) and
        /// when it was made: what a logout refuses.
        token_id: String,
        issued_ms: i64,
    },
}

impl Principal {
    /// The scope of the caller's Idempotency-Keys. A portal token has its own
    /// per application: a customer's key must not collide with (and so block) a
    /// key its tenant uses to publish.
    pub fn scope(&self) -> String {
        match self {
            Principal::Operator | Principal::Inspector { .. } => "operator".to_owned(),
            Principal::Tenant { tenant, .. } => tenant.as_str().to_owned(),
            // A publisher's and a poller's keys must not collide with a customer's either.
            Principal::Portal { tenant, app_id, message_only: true, .. } => format!("{tenant}/msgtoken/{app_id}"),
            Principal::Portal { tenant, app_id, poller: Some((ep, _)), .. } => format!("{tenant}/poller/{app_id}/{ep}"),
            Principal::Portal { tenant, app_id, .. } => format!("{tenant}/portal/{app_id}"),
        }
    }
}

fn principal(req: &HttpRequest) -> Option<Principal> {
    req.extensions().get::<Principal>().cloned()
}

/// Extracts the operator; a handler taking it cannot run for anyone else.
pub struct Operator;

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Operator) => Ok(Operator),
            _ => Err(ApiError::Unauthorized("the admin token is required".into())),
        })
    }
}

/// Extracts the calling tenant; every `/api/v1` handler scopes its queries by it.
/// A portal token yields its tenant too: the auth middleware has already confined
/// it to its application's routes.
/// What the operator is told when an inspection tries more than reading.
pub const INSPECTOR_READS: &str =
    "the operator reads a tenant's data here but does not act as it: use one of the tenant's API keys";

pub struct TenantAuth(pub TenantId);

impl FromRequest for TenantAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Tenant { tenant, .. })
            | Some(Principal::Portal { tenant, .. })
            | Some(Principal::Inspector { tenant }) => Ok(TenantAuth(tenant)),
            _ => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}

/// Which event types the caller sees: a tenant every one (`None`); a portal
/// token those without a feature flag and those behind one of its own flags
/// (Svix's `featureFlags`), so unreleased event types stay out of the portal.
pub struct FeatureFlags(pub Option<Vec<String>>);

impl FromRequest for FeatureFlags {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(match principal(req) {
            Some(Principal::Portal { feature_flags, .. }) => FeatureFlags(Some(feature_flags)),
            _ => FeatureFlags(None),
        }))
    }
}

/// Extracts a tenant that authenticated with an API key, not a portal token: for
/// what only the tenant itself may do (issuing portal tokens, say).
pub struct KeyAuth(pub TenantId);

impl FromRequest for KeyAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Tenant { tenant, .. }) | Some(Principal::Inspector { tenant }) => Ok(KeyAuth(tenant)),
            Some(Principal::Portal { .. }) => Err(ApiError::Forbidden("an app-portal token cannot do this".into())),
            _ => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}

/// The calling tenant and the API key it called with: for what lives only as
/// long as that key does (portal tokens, integration keys).
pub struct KeyHolder(pub TenantId, pub ApiKeyId);

impl FromRequest for KeyHolder {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match principal(req) {
            Some(Principal::Tenant { tenant, key }) => Ok(KeyHolder(tenant, key)),
            Some(Principal::Portal { .. }) => Err(ApiError::Forbidden("an app-portal token cannot do this".into())),
            Some(Principal::Inspector { .. }) => Err(ApiError::Forbidden(INSPECTOR_READS.into())),
            _ => Err(ApiError::Unauthorized("a tenant API key is required".into())),
        })
    }
}

/// What a portal principal may do with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum PortalAccess {
    Allowed,
    Denied,
    /// Allowed if this path segment (a uid) names the token's application now:
    /// a token is bound to the application's id, never to a uid that may move.
    IfAppIs(String),
}

/// Whether a portal principal may make this request: only its own application's
/// endpoints, messages and attempts, and reading event types.
pub fn portal_access(app_id: &str, method: &str, path: &str) -> PortalAccess {
    let allowed = |yes: bool| if yes { PortalAccess::Allowed } else { PortalAccess::Denied };
    // The router decodes `%XX` before it matches, so `conten%74` would reach the
    // route this check knows as `content`. No id or uid has a `%`: refuse them all.
    if path.contains('%') {
        return PortalAccess::Denied;
    }
    let rest = path.trim_end_matches('/');
    if rest.starts_with("/api/v1/event-type") {
        // A type's retry schedule is the tenant's business, and would tell a
        // token of types hidden behind a feature flag.
        return allowed(method == "GET" && !rest.ends_with("/retry-schedule"));
    }
    if about_itself(method, rest) {
        return PortalAccess::Allowed;
    }
    let Some(after) = rest.strip_prefix("/api/v1/app/") else { return PortalAccess::Denied };
    let (app, sub) = after.split_once('/').unwrap_or((after, ""));
    let route = match sub {
        // The application itself: read only.
        "" => method == "GET",
        // Publishing is the tenant's; customers read, subscribe and resend. The one
        // message a customer makes is a test event to one of its own endpoints
        // (`endpoint/{id}/send-example`, as in Svix's portal), reached below.
        "msg" => method == "GET",
        // The application's messages as a stream: the message list, read in order.
        "events" => method == "GET",
        // A content filter tried on a payload the caller gives: reads nothing stored.
        "filter/try" => method == "POST",
        // A test attempt publishes a message of any type, channels and payload the
        // caller chooses, to every endpoint it matches: the tenant's. The customer's
        // test is `send-example`: one of the types it may see, to one of its own
        // endpoints only, marked as a test (`hookgate.test-event`, which the streams
        // leave out), with the example or a payload it edits.
        _ if sub.ends_with("/msg/test-attempt") => false,
        // Erasing content is the tenant's (a GDPR request goes to it), not a customer's.
        _ if method == "DELETE" && sub.ends_with("/content") => false,
        // Destinations are the customer's too (as in Svix's portal), shown read
        // only: they are set up, changed and removed through the tenant's API.
        _ if sub.starts_with("destination") => method == "GET",
        _ => sub.starts_with("endpoint") || sub.starts_with("msg/") || sub.starts_with("attempt"),
    };
    match (route, app == app_id) {
        (false, _) => PortalAccess::Denied,
        (true, true) => PortalAccess::Allowed,
        (true, false) => PortalAccess::IfAppIs(app.to_owned()),
    }
}

/// What every kind of token may do about itself, and nothing else of `auth`: end
/// itself (Svix's `logout`) and ask what it is (`whoami`).
fn about_itself(method: &str, rest: &str) -> bool {
    (rest == "/api/v1/auth/logout" && method == "POST") || (rest == "/api/v1/auth/whoami" && method == "GET")
}

/// Whether a message token may make this request: creating a message in its
/// application (and asking what it is), nothing else.
/// Whether the operator, reading a tenant (`GET` only), may read `path`: the
/// routes the console's tenant page shows, listed one by one, so that no route
/// holding a credential (integration keys, source addresses, transformation
/// code, poller positions that a read would move, exports) is reachable by
/// forgetting to refuse it. Header values are hidden on the one headers route.
pub fn inspector_may_read(path: &str) -> bool {
    if path.contains('%') {
        return false;
    }
    let rest = path.trim_end_matches('/');
    let Some(after) = rest.strip_prefix("/api/v1/") else { return false };
    let parts: Vec<&str> = after.split('/').collect();
    match parts.as_slice() {
        ["auth", "whoami"] | ["event-type"] | ["event-type", _] | ["app"] | ["app", _] => true,
        ["app", _, tail @ ..] => matches!(
            tail,
            ["endpoint"]
                | ["endpoint", _]
                | ["endpoint", _, "headers"]
                | ["endpoint", _, "stats"]
                | ["endpoint", _, "stats", "hourly"]
                | ["endpoint", _, "msg"]
                | ["endpoint-health"]
                | ["destination"]
                | ["msg"]
                | ["msg", _]
                | ["msg", _, "endpoint"]
                | ["attempt", "msg", _]
                | ["attempt", "endpoint", _]
        ),
        _ => false,
    }
}

pub fn message_access(app_id: &str, method: &str, path: &str) -> PortalAccess {
    let rest = path.trim_end_matches('/');
    if path.contains('%') {
        return PortalAccess::Denied;
    }
    if about_itself(method, rest) {
        return PortalAccess::Allowed;
    }
    match rest.strip_prefix("/api/v1/app/").and_then(|r| r.strip_suffix("/msg")) {
        Some(app) if method == "POST" && !app.contains('/') => match app == app_id {
            true => PortalAccess::Allowed,
            false => PortalAccess::IfAppIs(app.to_owned()),
        },
        _ => PortalAccess::Denied,
    }
}

/// Whether a poller token for endpoint `ep` may make this request: polling that
/// endpoint (`…/poller/{ep}`, its consumers, `…/polling-endpoint/{ep}/consumer/…`),
/// named by its id, and asking what it is.
pub fn poller_access(app_id: &str, ep: &str, method: &str, path: &str) -> PortalAccess {
    let rest = path.trim_end_matches('/');
    if path.contains('%') {
        return PortalAccess::Denied;
    }
    if about_itself(method, rest) {
        return PortalAccess::Allowed;
    }
    let Some(after) = rest.strip_prefix("/api/v1/app/") else { return PortalAccess::Denied };
    let parts: Vec<&str> = after.split('/').collect();
    let route = match (method, parts.as_slice()) {
        ("GET", [_, "poller", e]) => *e == ep,
        ("GET", [_, "poller", e, "consumer", _]) => *e == ep,
        ("POST", [_, "poller", e, "consumer", _, "seek"]) => *e == ep,
        ("GET", [_, "polling-endpoint", e, "consumer", _]) => *e == ep,
        ("POST", [_, "polling-endpoint", e, "consumer", _, "commit"]) => *e == ep,
        _ => false,
    };
    match (route, parts[0] == app_id) {
        (false, _) => PortalAccess::Denied,
        (true, true) => PortalAccess::Allowed,
        (true, false) => PortalAccess::IfAppIs(parts[0].to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::{inspector_may_read, message_access, poller_access, portal_access, PortalAccess};

    #[test]
    fn the_operator_reads_what_the_tenant_page_shows_and_nothing_that_holds_a_credential() {
        for p in [
            "/api/v1/app",
            "/api/v1/app/app_1",
            "/api/v1/app/app_1/endpoint",
            "/api/v1/app/app_1/endpoint/ep_1",
            "/api/v1/app/app_1/endpoint/ep_1/headers",
            "/api/v1/app/app_1/endpoint/ep_1/stats/hourly",
            "/api/v1/app/app_1/endpoint-health",
            "/api/v1/app/app_1/msg/msg_1/endpoint",
            "/api/v1/app/app_1/attempt/endpoint/ep_1",
            "/api/v1/event-type/a.b",
            "/api/v1/auth/whoami",
        ] {
            assert!(inspector_may_read(p), "{p}");
        }
        for p in [
            "/api/v1/app/app_1/endpoint/ep_1/secret",
            "/api/v1/app/app_1/endpoint/ep_1/transformation",
            "/api/v1/app/app_1/endpoint/ep_1/oauth",
            "/api/v1/app/app_1/integration/int_1/key",
            "/api/v1/app/app_1/poller/ep_1/consumer/c1",
            "/api/v1/app/app_1/polling-endpoint/ep_1/consumer/c1",
            "/api/v1/app/app_1/destination/ep_1/secret",
            "/api/v1/source",
            "/api/v1/source/src_1",
            "/ingest/api/v1/source",
            "/api/v1/environment/export",
            "/api/v1/search",
            "/api/v1/audit",
            "/api/v1/app/app_1/msg/msg_1/raw",
            "/api/v1/app/app%5F1/endpoint",
            "/admin/v1/tenant",
        ] {
            assert!(!inspector_may_read(p), "{p}");
        }
    }

    #[test]
    fn a_poller_token_polls_its_own_endpoint_and_does_nothing_else() {
        let ok = |m, p| poller_access("app_1", "ep_1", m, p) == PortalAccess::Allowed;
        assert!(ok("GET", "/api/v1/app/app_1/poller/ep_1"));
        assert!(ok("GET", "/api/v1/app/app_1/poller/ep_1/consumer/c1"));
        assert!(ok("POST", "/api/v1/app/app_1/poller/ep_1/consumer/c1/seek"));
        assert!(ok("GET", "/api/v1/app/app_1/polling-endpoint/ep_1/consumer/c1"));
        assert!(ok("POST", "/api/v1/app/app_1/polling-endpoint/ep_1/consumer/c1/commit"));
        assert!(ok("GET", "/api/v1/auth/whoami"));
        assert_eq!(
            poller_access("app_1", "ep_1", "GET", "/api/v1/app/mine/poller/ep_1"),
            PortalAccess::IfAppIs("mine".into())
        );
        for (m, p) in [
            ("GET", "/api/v1/app/app_1/poller/ep_2"),
            ("GET", "/api/v1/app/app_1/poller/ep-uid"),
            ("POST", "/api/v1/app/app_1/poller/ep_1"),
            ("GET", "/api/v1/app/app_1/endpoint/ep_1"),
            ("GET", "/api/v1/app/app_1/msg"),
            ("POST", "/api/v1/app/app_1/msg"),
            ("GET", "/api/v1/app/app_1"),
            ("GET", "/api/v1/app/app_1/poller/ep_1/consumer/c1/seek"),
            ("GET", "/api/v1/app/app_1/poller/ep%5F1"),
        ] {
            assert!(!ok(m, p), "{m} {p}");
        }
    }

    #[test]
    fn a_message_token_creates_messages_in_its_application_and_does_nothing_else() {
        let ok = |m, p| message_access("app_1", m, p) == PortalAccess::Allowed;
        assert!(ok("POST", "/api/v1/app/app_1/msg"));
        assert!(ok("POST", "/api/v1/app/app_1/msg/"));
        assert_eq!(message_access("app_1", "POST", "/api/v1/app/mine/msg"), PortalAccess::IfAppIs("mine".into()));
        assert!(ok("GET", "/api/v1/auth/whoami"));
        assert!(ok("POST", "/api/v1/auth/logout"), "a leaked token can end itself");
        for (m, p) in [
            ("GET", "/api/v1/app/app_1/msg"),
            ("GET", "/api/v1/app/app_1/msg/msg_1"),
            ("POST", "/api/v1/app/app_1/msg/search"),
            ("POST", "/api/v1/app/app_1/endpoint"),
            ("GET", "/api/v1/app/app_1"),
            ("GET", "/api/v1/event-type"),
            ("POST", "/api/v1/msg/broadcast"),
            ("POST", "/api/v1/app/app_1/ms%67"),
            ("POST", "/api/v1/app/app_1/x/msg"),
        ] {
            assert!(!ok(m, p), "{m} {p}");
        }
    }

    #[test]
    fn a_portal_token_reaches_its_own_application_only() {
        let ok = |m, p| portal_access("app_1", m, p) == PortalAccess::Allowed;
        assert_eq!(portal_access("app_1", "GET", "/api/v1/app/mine/endpoint"), PortalAccess::IfAppIs("mine".into()));
        assert_eq!(portal_access("app_1", "POST", "/api/v1/app/mine/msg"), PortalAccess::Denied);
        assert!(ok("GET", "/api/v1/app/app_1"));
        assert!(ok("POST", "/api/v1/app/app_1/endpoint"));
        assert!(ok("POST", "/api/v1/app/app_1/msg/msg_1/endpoint/ep_1/resend"));
        assert!(ok("GET", "/api/v1/app/app_1/attempt/endpoint/ep_1"));
        assert!(ok("GET", "/api/v1/event-type"));
        assert!(!ok("GET", "/api/v1/event-type/a.b/retry-schedule"));
        assert!(ok("GET", "/api/v1/app/app_1/destination"));
        assert!(!ok("POST", "/api/v1/app/app_1/destination"));
        assert!(!ok("PATCH", "/api/v1/app/app_1/destination/ep_1"));
        assert!(!ok("POST", "/api/v1/event-type"));
        assert_eq!(portal_access("app_1", "GET", "/api/v1/app/app_2/endpoint"), PortalAccess::IfAppIs("app_2".into()));
        assert!(!ok("GET", "/api/v1/app"));
        assert!(!ok("DELETE", "/api/v1/app/app_1"));
        assert!(!ok("DELETE", "/api/v1/app/app_1/msg/msg_1/content"));
        assert!(!ok("DELETE", "/api/v1/app/app_1/msg/msg_1/conten%74"));
        assert!(!ok("DELETE", "/api/v1/app/app_1/msg/msg_1/attempt/atmpt_1/%63ontent"));
        assert!(!ok("GET", "/api/v1/app/app_1/endpoint%2Fx"));
        assert!(!ok("DELETE", "/api/v1/app/app_1/msg/msg_1/attempt/atmpt_1/content"));
        assert!(ok("DELETE", "/api/v1/app/app_1/endpoint/ep_1"));
        assert!(!ok("POST", "/api/v1/app/app_1/msg"));
        assert!(!ok("POST", "/api/v1/auth/app-portal-access/app_1"));
        assert!(ok("POST", "/api/v1/auth/logout"));
        assert!(ok("GET", "/api/v1/auth/whoami"));
        assert!(!ok("GET", "/api/v1/auth/whoami/x"));
        assert!(!ok("POST", "/api/v1/auth/app/app_1/expire-all"));
        assert!(!ok("GET", "/api/v1/app/app_1/integration"));
    }

    #[test]
    fn a_portal_token_reads_and_tests_its_own_messages_but_never_broadcasts_or_reads_the_tenants_events() {
        let ok = |m, p| portal_access("app_1", m, p) == PortalAccess::Allowed;
        assert!(ok("GET", "/api/v1/app/app_1/msg/msg_1/raw"));
        assert!(ok("GET", "/api/v1/app/app_1/msg/msg_1/attempt/atmpt_1/headers"));
        assert!(ok("POST", "/api/v1/app/app_1/msg/search"));
        // Its application's stream is its message list, read in order.
        assert!(ok("GET", "/api/v1/app/app_1/events"));
        assert!(!ok("POST", "/api/v1/app/app_1/endpoint/ep_1/msg/test-attempt"));
        assert!(ok("POST", "/api/v1/app/app_1/endpoint/ep_1/cancel-msgs"));
        assert!(!ok("GET", "/api/v1/events"));
        assert!(!ok("POST", "/api/v1/msg/broadcast"));
    }

    #[test]
    fn a_portal_token_reads_a_destinations_progress_but_moves_nothing_and_reads_no_statistics() {
        let ok = |m, p| portal_access("app_1", m, p) == PortalAccess::Allowed;
        assert!(ok("GET", "/api/v1/app/app_1/destination/ep_1/next-event"));
        assert!(ok("GET", "/api/v1/app/app_1/destination/ep_1/attempt"));
        assert!(!ok("POST", "/api/v1/app/app_1/destination/ep_1/skip"));
        assert!(!ok("POST", "/api/v1/app/app_1/destination/ep_1/force-retry"));
        assert!(!ok("PATCH", "/api/v1/app/app_1/destination/ep_1/headers"));
        assert!(ok("POST", "/api/v1/app/app_1/endpoint/ep_1/transformation/simulate"));
        assert!(ok("POST", "/api/v1/app/app_1/filter/try"));
        assert!(ok("GET", "/api/v1/app/app_1/endpoint/ep_1/rate-limit-status"));
        assert!(!ok("GET", "/api/v1/app/app_1/polling-endpoint/ep_1/consumer/c"));
        assert!(!ok("PATCH", "/api/v1/app/app_1/alert-email"));
        assert!(!ok("GET", "/api/v1/app/app_1/stats/attempts"));
        assert!(!ok("GET", "/api/v1/stats/app/app_1/attempt"));
        assert!(!ok("POST", "/api/v1/event-type/export/openapi"));
    }
}
