//! The audit log: every change the operator or a tenant makes through the API is
//! recorded after it succeeds (who, what, when), and the operator's reads of a
//! tenant's data too; read back by the operator and by the tenant.
//!
//! Recorded after the handler answered 2xx and before the answer leaves, so an
//! entry never names an action that failed. The entry is not in the action's
//! transaction: a process that dies between the two (or a database that refuses
//! the entry) leaves an action unrecorded, counted in
//! `hookgate_audit_failures_total` and logged. Message publishing, searches sent
//! as POST and a poller's commits are the data path, not changes, and are not
//! recorded.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    get,
    middleware::Next,
    web, Error, HttpMessage, HttpResponse,
};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::{ApiError, RequestId},
    ids::{AuditId, Ref, TenantId},
    store::{audit, page::Page, tenants},
    AppState,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{admin_tenant::find, KeyAuth, Operator, PageQuery, Principal};

/// The tenant an operator's action was about, where its path does not say
/// (a tenant just created): set by the handler.
#[derive(Debug, Clone)]
pub struct AuditTenant(pub TenantId);

pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(list_for_operator);
}

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_for_tenant);
}

/// Whether a request of this method and path changes something worth an entry.
fn changes(method: &str, path: &str) -> bool {
    if matches!(method, "GET" | "HEAD" | "OPTIONS") {
        return false;
    }
    let rest = path.trim_end_matches('/');
    let data_path = (method == "POST" && rest.starts_with("/api/v1/app/") && rest.ends_with("/msg"))
        || rest.ends_with("/msg/search")
        || rest.ends_with("/seek")
        || rest.ends_with("/commit");
    // Reads sent as POST: a publisher's precheck (as often as it publishes), a transformation's and a
    // filter's tries.
    let reads = rest.ends_with("/precheck/active")
        || rest.ends_with("/transformation/try")
        || rest.ends_with("/simulate")
        || rest.ends_with("/filter/try");
    !data_path && !reads
}

/// Who acted, as the entry names them.
fn actor(p: &Principal) -> String {
    match p {
        Principal::Operator | Principal::Inspector { .. } => "operator".to_owned(),
        Principal::Tenant { key, .. } => format!("key:{key}"),
        Principal::Portal { poller: Some((ep, _)), .. } => format!("poller:{ep}"),
        Principal::Portal { app_id, message_only: true, .. } => format!("message-token:{app_id}"),
        Principal::Portal { app_id, .. } => format!("portal:{app_id}"),
    }
}

/// The tenant an operator's path names (`/admin/v1/tenant/{id or uid}/…`),
/// looked up before the handler runs: a tenant deleted by the request is found
/// no more after it. `Err` when the lookup itself failed.
async fn admin_tenant(state: &AppState, path: &str) -> Result<Option<TenantId>, String> {
    let Some(given) = path.strip_prefix("/admin/v1/tenant/").and_then(|r| r.split('/').next()) else {
        return Ok(None);
    };
    let Ok(given) = Ref::<TenantId>::parse(given) else { return Ok(None) };
    if let Ref::Id(id) = &given {
        return Ok(Some(id.clone()));
    }
    let found = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        tenants::find(&**conn, &given).await
    })
    .await;
    found.map(|t| t.map(|t| t.id)).map_err(|e| e.to_string())
}

/// An action that may have been done and has no entry: counted and logged once, here.
fn unrecorded(state: &AppState, method: &str, path: &str, why: &str) {
    state.metrics.audit_failures.inc();
    tracing::warn!(%method, %path, %why, "an action may have been done but has no audit entry");
}

/// Records a successful change, and every read the operator makes as a tenant.
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    // Decided before anything is copied: most requests (reads, publishing) pass straight through.
    let inspecting = matches!(req.extensions().get::<Principal>(), Some(Principal::Inspector { .. }));
    if !inspecting && !changes(req.method().as_str(), req.path()) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let principal = req.extensions().get::<Principal>().cloned();
    let Some(principal) = principal else { return Ok(next.call(req).await?.map_into_boxed_body()) };
    let (method, path) = (req.method().as_str().to_owned(), req.path().to_owned());
    let state = req.app_data::<web::Data<AppState>>().cloned().expect("AppState is registered on the app");
    let named = match principal {
        Principal::Operator => admin_tenant(&state, &path).await,
        _ => Ok(None),
    };
    let res = match next.call(req).await {
        Ok(res) => res.map_into_boxed_body(),
        Err(e) => {
            // The deadline's 503: the handler was cut off, perhaps after its commit.
            if !inspecting {
                unrecorded(&state, &method, &path, "the request was cut off by its deadline");
            }
            return Err(e);
        }
    };
    if !res.status().is_success() {
        return Ok(res);
    }
    let named = match named {
        Ok(named) => named,
        Err(e) => {
            unrecorded(&state, &method, &path, &format!("its tenant could not be looked up: {e}"));
            None
        }
    };
    let tenant = match &principal {
        Principal::Operator => res.request().extensions().get::<AuditTenant>().map(|t| t.0.clone()).or(named),
        Principal::Inspector { tenant } | Principal::Tenant { tenant, .. } | Principal::Portal { tenant, .. } => {
            Some(tenant.clone())
        }
    };
    // The operator's own routes that name no tenant (the fleet's health) are not a tenant's business.
    let Some(tenant) = tenant else { return Ok(res) };
    let request_id = res.request().extensions().get::<RequestId>().map(|r| r.0.clone());
    let who = actor(&principal);
    let status = res.status().as_u16();
    let written = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        audit::record(&**conn, &tenant, &who, &method, &path, status, request_id.as_deref()).await
    })
    .await;
    match written {
        Ok(()) => Ok(res),
        // A read has done nothing yet: it is answered only once it is recorded.
        Err(e) if inspecting => {
            tracing::warn!(%tenant, error = %e, "the operator's read refused: its audit entry could not be written");
            let (req, _) = res.into_parts();
            let refused = ApiError::Unavailable;
            Ok(ServiceResponse::new(req, actix_web::ResponseError::error_response(&refused)))
        }
        Err(e) => {
            unrecorded(&state, &method, &path, &format!("its entry could not be written: {e}"));
            Ok(res)
        }
    }
}

/// One entry of the audit log.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = AuditEntryOut)]
struct EntryOut {
    id: String,
    /// `operator`, `key:<key id>`, `portal:<application id>`, `message-token:<application id>`
    /// or `poller:<endpoint id>`.
    actor: String,
    /// The label of the API key that acted, if it has one.
    actor_label: Option<String>,
    method: String,
    /// The request's path (never its query).
    path: String,
    status_code: i16,
    request_id: Option<String>,
    created_at: DateTime<Utc>,
}

async fn page_of(state: &AppState, tenant: &TenantId, q: &PageQuery) -> Result<HttpResponse, ApiError> {
    let page = q.page::<AuditId>()?;
    let entries = state.read(async |c| audit::list(c, tenant, &page).await).await?;
    Ok(HttpResponse::Ok().json(entries.map(|e| EntryOut {
        id: e.id.to_string(),
        actor: e.actor,
        actor_label: e.actor_label,
        method: e.method,
        path: e.path,
        status_code: e.status_code,
        request_id: e.request_id,
        created_at: e.created_at,
    })))
}

/// The tenant's audit log, newest first: what the operator and the tenant changed, and what the operator read.
#[utoipa::path(params(PageQuery), tag = "Admin", operation_id = "admin.tenant.audit", responses((status = 200, body = Page<EntryOut>)))]
#[get("/tenant/{tenant_id}/audit")]
async fn list_for_operator(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    page_of(&state, &tenant.id, &q).await
}

/// This tenant's audit log, newest first (Hookgate's own route): what its keys, its
/// customers' portal links and the operator changed, and what the operator read.
#[utoipa::path(params(PageQuery), tag = "Hookgate", operation_id = "hookgate.audit.list", responses((status = 200, body = Page<EntryOut>)))]
#[get("/audit")]
async fn list_for_tenant(
    key: KeyAuth,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    page_of(&state, &key.0, &q).await
}

#[cfg(test)]
mod tests {
    use super::changes;

    #[test]
    fn changes_are_recorded_and_reads_and_the_data_path_are_not() {
        assert!(changes("POST", "/api/v1/app"));
        assert!(changes("PATCH", "/api/v1/app/app_1/endpoint/ep_1"));
        assert!(changes("DELETE", "/admin/v1/tenant/tnt_1/api-key/key_1"));
        assert!(changes("POST", "/api/v1/app/app_1/msg/msg_1/resend"), "a resend is an action");
        assert!(changes("POST", "/api/v1/msg/broadcast"));
        assert!(!changes("GET", "/api/v1/app"));
        assert!(!changes("POST", "/api/v1/app/app_1/msg"));
        assert!(!changes("POST", "/api/v1/app/app_1/msg/"));
        assert!(!changes("POST", "/api/v1/app/app_1/msg/search"));
        assert!(!changes("POST", "/api/v1/app/app_1/polling-endpoint/ep_1/consumer/c/commit"));
    }
}
