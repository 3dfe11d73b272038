//! The operator's routes for a tenant's API keys: issue (with a label), list,
//! relabel, revoke. A key is shown once, when it is issued.

use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{ApiKeyId, Ref, TenantId},
    store::{api_keys, StoreError},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::{answer, RequestKey};
use crate::{admin_tenant::find, optional_json, Operator};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create_key).service(list_keys).service(label_key).service(revoke_key);
}

/// The most characters of a label.
const LABEL_CHARS: usize = 100;

/// A key to issue: a label saying who or what holds it (optional).
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ApiKeyIn)]
struct KeyIn {
    label: Option<String>,
}

/// A key's new label; `null` removes it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ApiKeyPatch)]
struct LabelIn {
    label: Option<String>,
}

/// A label as kept: trimmed, empty as none; refused when long or holding control characters.
fn label(given: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(l) = given.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()) else { return Ok(None) };
    if l.chars().count() > LABEL_CHARS {
        return Err(ApiError::Validation(format!("`label`: at most {LABEL_CHARS} characters")));
    }
    if l.chars().any(char::is_control) {
        return Err(ApiError::Validation("`label`: no control characters".into()));
    }
    Ok(Some(l))
}

/// A new API key (shown this once).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApiKeyCreatedOut)]
struct CreatedKey {
    id: String,
    api_key: String,
    label: Option<String>,
    created_at: DateTime<Utc>,
}

/// One of a tenant's API keys: never the key itself.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ApiKeyOut)]
struct KeyOut {
    created_at: DateTime<Utc>,
    id: String,
    label: Option<String>,
    revoked_at: Option<DateTime<Utc>>,
}

/// A tenant's API keys, newest first (revoked ones too, marked).
#[derive(Serialize, ToSchema)]
#[schema(as = ApiKeyListOut)]
struct KeysOut {
    data: Vec<KeyOut>,
}

/// Issues the tenant another API key, labelled if a body says so.
#[utoipa::path(tag = "Admin", operation_id = "admin.api-key.create", request_body(content = Option<KeyIn>),
    responses((status = 201, body = CreatedKey)))]
#[post("/tenant/{tenant_id}/api-key")]
async fn create_key(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
    body: web::Bytes,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let given: KeyIn = optional_json(&body)?;
    let label = label(given.label)?;
    let tenant = find(&state, &id).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let key = api_keys::issue(&*tx, &tenant.id, &state.api_keys, label.as_deref()).await?;
    let created = CreatedKey { id: key.id.to_string(), api_key: key.key, label, created_at: key.created_at };
    let res = answer(&*tx, &state, request.as_deref(), StatusCode::CREATED, &created).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}

/// The tenant's API keys, ids, labels and dates only.
#[utoipa::path(tag = "Admin", operation_id = "admin.api-key.list", responses((status = 200, body = KeysOut)))]
#[get("/tenant/{tenant_id}/api-key")]
async fn list_keys(
    _: Operator,
    state: web::Data<AppState>,
    id: web::Path<Ref<TenantId>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    let keys = api_keys::list(&**conn, &tenant.id).await?;
    let data = keys
        .into_iter()
        .map(|k| KeyOut { id: k.id.to_string(), label: k.label, created_at: k.created_at, revoked_at: k.revoked_at })
        .collect();
    Ok(HttpResponse::Ok().json(KeysOut { data }))
}

/// Labels (or unlabels) one of the tenant's keys, revoked or not.
#[utoipa::path(tag = "Admin", operation_id = "admin.api-key.patch", responses((status = 204, description = "labelled")))]
#[patch("/tenant/{tenant_id}/api-key/{key_id}")]
async fn label_key(
    _: Operator,
    state: web::Data<AppState>,
    path: web::Path<(Ref<TenantId>, ApiKeyId)>,
    body: web::Json<LabelIn>,
) -> Result<HttpResponse, ApiError> {
    let (id, key_id) = path.into_inner();
    let label = label(body.into_inner().label)?;
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    if !api_keys::set_label(&**conn, &tenant.id, &key_id, label.as_deref()).await? {
        return Err(ApiError::NotFound("API key"));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// Revokes one of the tenant's API keys.
#[utoipa::path(tag = "Admin", operation_id = "admin.api-key.revoke", responses((status = 204, description = "revoked")))]
#[delete("/tenant/{tenant_id}/api-key/{key_id}")]
async fn revoke_key(
    _: Operator,
    state: web::Data<AppState>,
    path: web::Path<(Ref<TenantId>, ApiKeyId)>,
) -> Result<HttpResponse, ApiError> {
    let (id, key_id) = path.into_inner();
    let tenant = find(&state, &id).await?;
    let conn = db::conn(&state.db).await?;
    if !api_keys::revoke(&**conn, &tenant.id, &key_id, &state.caches).await? {
        return Err(ApiError::NotFound("API key"));
    }
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::label;

    #[test]
    fn a_label_is_trimmed_empty_is_none_and_long_or_control_labels_are_refused() {
        assert_eq!(label(Some("  ci deploy ".into())).unwrap(), Some("ci deploy".into()));
        assert_eq!(label(Some("   ".into())).unwrap(), None);
        assert_eq!(label(None).unwrap(), None);
        assert!(label(Some("x".repeat(101))).is_err());
        assert!(label(Some("a\u{7}b".into())).is_err());
        assert_eq!(label(Some("é".repeat(100))).unwrap().map(|l| l.chars().count()), Some(100));
    }
}
