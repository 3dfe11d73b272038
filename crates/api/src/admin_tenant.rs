//! The tenant an operator's `/admin/v1/tenant/{id or uid}/…` path names, found
//! for every admin route (and the audit log's attribution) in one place.

use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, TenantId},
    store::{tenants, tenants::Tenant},
    AppState,
};

/// A live tenant by id or uid, or 404.
pub(crate) async fn find(state: &AppState, tenant: &Ref<TenantId>) -> Result<Tenant, ApiError> {
    let conn = db::conn(&state.db).await?;
    tenants::find(&**conn, tenant).await?.ok_or(ApiError::NotFound("tenant"))
}
