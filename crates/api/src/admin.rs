//! The operator's admin API, `/admin/v1`: tenants and their API keys.

use crate::admin_tenant::find;
use crate::idempotency::{answer, RequestKey};
use crate::{Maybe, Operator, PageQuery};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, web, HttpMessage, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::page::Page;
use hookgate_shared::store::StoreError;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref, TenantId},
    quota::{self, Limit, Quotas},
    store::{
        api_keys, applications, deliveries, fifo, tenants, tenants::QuotaPatch, tenants::Tenant, tenants::TenantPatch,
    },
};
use serde::{Deserialize, Serialize};
use utoipa::openapi::{schema::Schema, RefOr};
use utoipa::{PartialSchema, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use hookgate_shared::AppState;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_tenant)
        .service(list_tenants)
        .service(get_tenant)
        .service(patch_tenant)
        .service(delete_tenant)
        .service(erase_app);
    crate::admin_keys::configure(cfg);
    crate::admin_views::configure(cfg);
    crate::audit::configure_admin(cfg);
    crate::v1::operational::configure_admin(cfg);
    crate::v1::alert_settings::configure_admin(cfg);
    crate::admin_broker_sources::configure(cfg);
    cfg.service(crate::v1::usage::tenant_usage);
}

/// A tenant to create: a name, and a uid to find it by.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct TenantIn {
    name: String,
    uid: Option<String>,
}

/// The tenant fields a PATCH changes: absent leaves one alone, `null` sets it back to the default.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TenantPatch)]
struct TenantPatchIn {
    name: Option<String>,
    #[serde(default)]
    uid: Maybe<String>,
    disabled: Option<bool>,
    /// Whether deliveries carry the `svix-*` header aliases (default true).
    #[serde(rename = "svixHeaders")]
    svix_headers: Option<bool>,
    /// `{"inboundDays", "messageDays"}`, each a number or `null` for the default;
    /// `null` for both.
    #[serde(default)]
    retention: Maybe<RetentionIn>,
    /// `{"apiRequestsPerSecond", …}`: each a number (0: no limit), `null` for the
    /// default, or absent to leave it; `null` for all of them.
    #[serde(default)]
    #[schema(value_type = Option<HashMap<String, Option<i64>>>)]
    quotas: Maybe<serde_json::Map<String, serde_json::Value>>,
    /// Whether the tenant's endpoint transformations run (off by default).
    transformations: Option<bool>,
    /// Private networks (CIDRs) this tenant's endpoints may reach; `[]` for none.
    #[serde(rename = "egressAllowNetworks")]
    egress_allow_networks: Option<Vec<String>>,
}

/// A tenant's retention to set: days, each `null` for the operator's default.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RetentionIn {
    #[serde(default)]
    inbound_days: Maybe<i32>,
    #[serde(default)]
    message_days: Maybe<i32>,
}

/// A tenant's retention: as set (`null` follows the operator's default), and in effect.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct RetentionOut {
    inbound_days: Option<i32>,
    message_days: Option<i32>,
    effective: Effective,
}

/// The retention in effect, in days.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = RetentionEffective)]
struct Effective {
    inbound_days: i32,
    message_days: i32,
}

/// A tenant, with its settings as set and in effect.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TenantOut {
    id: String,
    name: String,
    uid: Option<String>,
    disabled: bool,
    svix_headers: bool,
    retention: RetentionOut,
    quotas: QuotasOut,
    egress_allow_networks: Vec<String>,
    transformations: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TenantOut {
    fn new(t: Tenant, config: &hookgate_shared::Config) -> Self {
        TenantOut {
            id: t.id.to_string(),
            name: t.name,
            uid: t.uid,
            disabled: t.disabled,
            svix_headers: t.svix_headers,
            retention: RetentionOut {
                inbound_days: t.inbound_days,
                message_days: t.message_days,
                effective: Effective {
                    inbound_days: t.inbound_days.unwrap_or(config.retention_inbound_days),
                    message_days: t.message_days.unwrap_or(config.retention_message_days),
                },
            },
            quotas: QuotasOut { own: t.quotas, effective: t.quotas.over(&config.quotas) },
            egress_allow_networks: t.egress_allow_networks,
            transformations: t.transformations,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// A tenant's quotas: as set (`null` follows the operator's default; 0 is no
/// limit), and in effect.
#[derive(Serialize, ToSchema)]
#[schema(as = TenantQuotasOut)]
struct QuotasOut {
    #[serde(flatten)]
    #[schema(schema_with = own_quotas)]
    own: Quotas,
    effective: Quotas,
}

/// `Quotas` as flattened beside `effective`: without its ban on other fields.
fn own_quotas() -> RefOr<Schema> {
    match Quotas::schema() {
        RefOr::T(Schema::Object(mut o)) => {
            o.additional_properties = None;
            RefOr::T(Schema::Object(o))
        }
        other => other,
    }
}

/// A `quotas` PATCH: every name known, every value a whole number from 0 or `null`.
fn quota_patch(body: Maybe<serde_json::Map<String, serde_json::Value>>) -> Result<Option<QuotaPatch>, ApiError> {
    let map = match body {
        Maybe::Absent => return Ok(None),
        Maybe::Null => return Ok(Some(QuotaPatch { reset: true, ..QuotaPatch::default() })),
        Maybe::Value(map) => map,
    };
    let mut patch = QuotaPatch::default();
    for (name, value) in map {
        if !Limit::ALL.iter().any(|l| l.name() == name) {
            let known: Vec<&str> = Limit::ALL.iter().map(|l| l.name()).collect();
            return Err(ApiError::Validation(format!("`quotas.{name}` is not a quota; known: {}", known.join(", "))));
        }
        match value.as_i64() {
            _ if value.is_null() => patch.clear.push(name),
            Some(v) if (0..=quota::MAX_VALUE).contains(&v) => {
                patch.set.insert(name, v.into());
            }
            _ => {
                return Err(ApiError::Validation(format!(
                    "`quotas.{name}` must be a whole number from 0 (no limit) to {}, or null for the default",
                    quota::MAX_VALUE
                )))
            }
        }
    }
    Ok(Some(patch))
}

/// A new tenant, with its first API key (shown this once).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = TenantCreatedOut)]
struct CreatedTenant {
    #[serde(flatten)]
    tenant: TenantOut,
    api_key: String,
    api_key_id: String,
}

fn check_name(name: &str) -> Result<(), ApiError> {
    hookgate_shared::ids::check_tenant_name(name).map_err(ApiError::Validation)
}

fn check_uid(uid: &str) -> Result<(), ApiError> {
    hookgate_shared::ids::check_tenant_uid(uid).map_err(ApiError::Validation)
}

fn uid_conflict(e: ApiError) -> ApiError {
    match e {
        ApiError::Conflict(_) => ApiError::Conflict("a tenant with this `uid` already exists".into()),
        other => other,
    }
}

/// Creates a tenant and its first API key.
#[utoipa::path(tag = "Admin", operation_id = "admin.tenant.create", responses((status = 201, body = CreatedTenant)))]
#[post("/tenant")]
async fn create_tenant(
    _: Operator,
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<TenantIn>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    check_name(&body.name)?;
    if let Some(uid) = &body.uid {
        check_uid(uid)?;
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let id = TenantId::generate();
    let tenant =
        tenants::insert(&*tx, &id, body.name.trim(), body.uid.as_deref()).await.map_err(|e| uid_conflict(e.into()))?;
    let key = api_keys::issue(&*tx, &id, &state.api_keys, None).await?;
    let created = CreatedTenant {
        tenant: TenantOut::new(tenant, &state.config),
        api_key: key.key,
        api_key_id: key.id.to_string(),
    };
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::CREATED, &created).await?;
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(tenant = %id, "tenant created");
    req.extensions_mut().insert(crate::audit::AuditTenant(id.clone()));
    Ok(res)
}

/// Lists the tenants.
#[utoipa::path(params(PageQuery), tag = "Admin", operation_id = "admin.tenant.list", responses((status = 200, body = Page<TenantOut>)))]
#[get("/tenant")]
async fn list_tenants(
    _: Operator,
    state: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let page = tenants::list(&**conn, &q.page::<TenantId>()?).await?;
    Ok(HttpResponse::Ok().json(page.map(|t| TenantOut::new(t, &state.config))))
}

/// The operator's erasure of one of a tenant's customers (an application and
/// everything under it), for a GDPR request made to the agency; as the tenant's
/// own `DELETE /api/v1/app/{app_id}`.
#[utoipa::path(tag = "Admin", operation_id = "admin.application.erase", responses((status = 204, description = "erased"), (status = 202, body = crate::v1::applications::Erasing)))]
#[delete("/tenant/{tenant_id}/app/{app_id}")]
async fn erase_app(
    _: Operator,
    state: web::Data<AppState>,
    path: web::Path<(Ref<TenantId>, Ref<AppId>)>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &path.0).await?;
    let app = {
        let conn = db::conn(&state.db).await?;
        applications::get(&**conn, &tenant.id, &path.1).await?.ok_or(ApiError::NotFound("application"))?
    };
    crate::v1::applications::erase(&state, &tenant.id, &app.id).await
}

/// Gets a tenant by id or uid.
#[utoipa::path(tag = "Admin", operation_id = "admin.tenant.get", responses((status = 200, body = TenantOut)))]
#[get("/tenant/{tenant_id}")]
async fn get_tenant(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(TenantOut::new(find(&state, &id).await?, &state.config)))
}

/// Changes the tenant's fields the body gives.
#[utoipa::path(tag = "Admin", operation_id = "admin.tenant.patch", responses((status = 200, body = TenantOut)))]
#[patch("/tenant/{tenant_id}")]
async fn patch_tenant(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
    body: web::Json<TenantPatchIn>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if let Some(name) = &body.name {
        check_name(name)?;
    }
    if let Some(uid) = body.uid.value() {
        check_uid(uid)?;
    }
    let (inbound_days, message_days) = match body.retention {
        Maybe::Null => (Some(None), Some(None)),
        Maybe::Value(r) => {
            let check = |v: &Maybe<i32>, name: &str, max: i32| match v.value() {
                Some(d) if !(1..=max).contains(d) => Err(ApiError::Validation(format!(
                    "`retention.{name}` must be 1 to {max} days, or null for the default"
                ))),
                _ => Ok(()),
            };
            check(&r.inbound_days, "inboundDays", 90)?;
            check(&r.message_days, "messageDays", 3650)?;
            (r.inbound_days.into_update(), r.message_days.into_update())
        }
        Maybe::Absent => (None, None),
    };
    let quotas = quota_patch(body.quotas)?;
    let egress_allow_networks = body.egress_allow_networks.map(|n| networks(&n)).transpose()?;
    let tenant = find(&state, &id).await?;
    let patch = TenantPatch {
        quotas,
        name: body.name.map(|n| n.trim().to_owned()),
        uid: body.uid.into_update(),
        disabled: body.disabled,
        svix_headers: body.svix_headers,
        inbound_days,
        message_days,
        egress_allow_networks,
        transformations: body.transformations,
    };
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let updated = tenants::update(&*tx, &tenant.id, &patch, &state.caches).await.map_err(|e| uid_conflict(e.into()))?;
    let updated = updated.ok_or(ApiError::NotFound("tenant"))?;
    // Enabled: its FIFO endpoints parked while it was disabled catch up. In the
    // same transaction, after the change (see `fifo::end`).
    if patch.disabled == Some(false) {
        fifo::wake_tenant(&*tx, &tenant.id).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    // Enabled again: the deliveries paused while it was disabled go out now.
    if patch.disabled == Some(false) && tenant.disabled && deliveries::resume_tenant(&**conn, &tenant.id).await? > 0 {
        state.wake.poke();
    }
    Ok(HttpResponse::Ok().json(TenantOut::new(updated, &state.config)))
}

/// The most networks one tenant may be given.
const MAX_NETWORKS: usize = 16;

/// `egressAllowNetworks`: CIDRs (a bare address is one host), as stored: each
/// truncated to its network, sorted, once.
fn networks(given: &[String]) -> Result<Vec<String>, ApiError> {
    if given.len() > MAX_NETWORKS {
        return Err(ApiError::Validation(format!("`egressAllowNetworks` may hold at most {MAX_NETWORKS} networks")));
    }
    let mut out = Vec::with_capacity(given.len());
    for raw in given {
        let raw = raw.trim();
        let net =
            raw.parse::<ipnet::IpNet>().or_else(|_| raw.parse::<std::net::IpAddr>().map(ipnet::IpNet::from)).map_err(
                |_| ApiError::Validation(format!("`egressAllowNetworks`: `{raw}` is not a CIDR such as 10.1.0.0/16")),
            )?;
        out.push(net.trunc().to_string());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Deletes a tenant: its API keys stop working at once.
#[utoipa::path(tag = "Admin", operation_id = "admin.tenant.delete", responses((status = 204, description = "deleted")))]
#[delete("/tenant/{tenant_id}")]
async fn delete_tenant(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    if !tenants::delete(&**conn, &tenant.id, &state.caches).await? {
        return Err(ApiError::NotFound("tenant"));
    }
    tracing::info!(tenant = %tenant.id, "tenant deleted");
    Ok(HttpResponse::NoContent().finish())
}
