//! The operator's broker sources for a tenant: `/admin/v1/tenant/{tenant}/broker-source…`,
//! the tenant's own routes (`v1::broker_source`) with the admin token and the
//! tenant named in the path.

use actix_web::{delete, get, patch, post, web, HttpResponse};
use hookgate_shared::{
    http::ApiError,
    ids::{Ref, TenantId},
    store::page::Page,
    AppState,
};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{
    admin_tenant::find,
    v1::broker_source::{self as own, DeadLetterOut, DeadLetterQuery, SourceIn, SourceOut, SourcePatch},
    Operator, PageQuery,
};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create).service(get_one).service(update).service(delete_one).service(dead_letters);
}

type One = web::Path<(Ref<TenantId>, String)>;

/// The tenant's broker sources.
#[utoipa::path(params(PageQuery), tag = "Admin", operation_id = "admin.broker-source.list", responses((status = 200, body = Page<SourceOut>)))]
#[get("/tenant/{tenant_id}/broker-source")]
async fn list(
    _: Operator,
    state: web::Data<AppState>,
    path: web::Path<Ref<TenantId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path).await?;
    own::list_for(&state, &t.id, &q).await
}

/// Creates a broker source for the tenant.
#[utoipa::path(tag = "Admin", operation_id = "admin.broker-source.create", request_body = SourceIn, responses((status = 201, body = SourceOut)))]
#[post("/tenant/{tenant_id}/broker-source")]
async fn create(
    _: Operator,
    state: web::Data<AppState>,
    path: web::Path<Ref<TenantId>>,
    body: web::Json<SourceIn>,
) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path).await?;
    own::create_for(&state, &t.id, body.into_inner()).await
}

#[utoipa::path(tag = "Admin", operation_id = "admin.broker-source.get", responses((status = 200, body = SourceOut)))]
#[get("/tenant/{tenant_id}/broker-source/{source_id}")]
async fn get_one(_: Operator, state: web::Data<AppState>, path: One) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path.0).await?;
    own::get_for(&state, &t.id, &path.1).await
}

#[utoipa::path(tag = "Admin", operation_id = "admin.broker-source.patch", request_body = SourcePatch, responses((status = 200, body = SourceOut)))]
#[patch("/tenant/{tenant_id}/broker-source/{source_id}")]
async fn update(
    _: Operator,
    state: web::Data<AppState>,
    path: One,
    body: web::Json<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path.0).await?;
    own::patch_for(&state, &t.id, &path.1, body.into_inner()).await
}

#[utoipa::path(tag = "Admin", operation_id = "admin.broker-source.delete", responses((status = 204, description = "deleted")))]
#[delete("/tenant/{tenant_id}/broker-source/{source_id}")]
async fn delete_one(_: Operator, state: web::Data<AppState>, path: One) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path.0).await?;
    own::delete_for(&state, &t.id, &path.1).await
}

#[utoipa::path(tag = "Admin", operation_id = "admin.broker-source.dead-letters", params(DeadLetterQuery), responses((status = 200, body = Page<DeadLetterOut>)))]
#[get("/tenant/{tenant_id}/broker-source/{source_id}/dead-letter")]
async fn dead_letters(
    _: Operator,
    state: web::Data<AppState>,
    path: One,
    q: web::Query<DeadLetterQuery>,
) -> Result<HttpResponse, ApiError> {
    let t = find(&state, &path.0).await?;
    own::dead_letters_for(&state, &t.id, &path.1, &q).await
}
