//! `v1.endpoint.transformation`: get and patch an endpoint's JavaScript
//! transformation (`code`, `enabled`, `variables`), as Svix's SDKs call it.

use std::collections::BTreeMap;

use actix_web::{get, patch, web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use hookgate_egress::{secrets, transform};
use hookgate_shared::ids::{AppId, EndpointId, Ref};
use hookgate_shared::store::{tenants, transformations};
use hookgate_shared::{db, http::ApiError, AppState};

use super::endpoints::find;
use crate::TenantAuth;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(get_one).service(patch_one);
}

/// Longest code a transformation may have.
const MOST_CODE: usize = 64 * 1024;
/// Variables a transformation may have, and the longest name and value.
const MOST_VARIABLES: usize = 32;
const MOST_NAME: usize = 128;
const MOST_VALUE: usize = 4096;

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransformationPatch {
    code: Option<String>,
    enabled: Option<bool>,
    variables: Option<BTreeMap<String, String>>,
}

#[get("/app/{app_id}/endpoint/{endpoint_id}/transformation")]
async fn get_one(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let conn = db::conn(&state.db).await?;
    let stored = transformations::get(&**conn, &tenant.0, &app, &ep.id).await?;
    let Some(t) = stored else {
        return Ok(HttpResponse::Ok().json(json!({ "code": null, "enabled": false, "variables": {}, "updatedAt": null })));
    };
    let variables = secrets::open_variables(&state, &tenant.0, &app, &ep.id, t.variables.as_deref())
        .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?;
    Ok(HttpResponse::Ok().json(out(&t, variables)))
}

fn out(t: &transformations::Transformation, variables: Value) -> Value {
    json!({ "code": t.code, "enabled": t.enabled, "variables": variables, "updatedAt": t.updated_at })
}

/// Sets what the body gives and keeps the rest. Enabling needs the tenant's
/// transformations switched on (by the operator), and code that runs and
/// defines `handler`: both are checked here, not at the first delivery.
#[patch("/app/{app_id}/endpoint/{endpoint_id}/transformation")]
async fn patch_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<TransformationPatch>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if body.code.as_ref().is_some_and(|c| c.len() > MOST_CODE) {
        return Err(ApiError::Validation(format!("`code`: at most {MOST_CODE} bytes")));
    }
    if let Some(vars) = &body.variables {
        if vars.len() > MOST_VARIABLES {
            return Err(ApiError::Validation(format!("`variables`: at most {MOST_VARIABLES}")));
        }
        if let Some((k, _)) = vars.iter().find(|(k, v)| k.is_empty() || k.len() > MOST_NAME || v.len() > MOST_VALUE) {
            return Err(ApiError::Validation(format!(
                "`variables`: `{}`: names of 1-{MOST_NAME} characters, values of at most {MOST_VALUE}",
                k.chars().take(MOST_NAME).collect::<String>()
            )));
        }
    }
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(hookgate_shared::store::StoreError::from)?;
    let before = transformations::get(&*tx, &tenant.0, &app, &ep.id).await?;
    let code = body.code.clone().or_else(|| before.as_ref().map(|t| t.code.clone())).unwrap_or_default();
    let enabled = body.enabled.or(before.as_ref().map(|t| t.enabled)).unwrap_or(false);
    if enabled {
        let allowed = tenants::get(&*tx, &tenant.0).await?.is_some_and(|t| t.transformations);
        if !allowed {
            return Err(ApiError::Forbidden(
                "transformations are off for this tenant: the operator turns them on (`transformations` on the tenant)"
                    .into(),
            ));
        }
        if code.trim().is_empty() {
            return Err(ApiError::Validation("`code`: a transformation is enabled with code defining `handler`".into()));
        }
    }
    if body.code.as_ref().is_some_and(|c| !c.trim().is_empty()) {
        let checked = code.clone();
        let verdict = tokio::task::spawn_blocking(move || transform::check(&checked))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if let Err(e) = verdict {
            return Err(ApiError::Validation(format!("`code`: {e}")));
        }
    }
    let variables = match body.variables {
        Some(v) => serde_json::to_value(v).map_err(|e| ApiError::Internal(e.to_string()))?,
        None => match &before {
            Some(t) => secrets::open_variables(&state, &tenant.0, &app, &ep.id, t.variables.as_deref())
                .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?,
            None => json!({}),
        },
    };
    let sealed = secrets::seal_variables(&state, &tenant.0, &app, &ep.id, &variables);
    let saved = transformations::set(&*tx, &tenant.0, &app, &ep.id, &code, enabled, Some(&sealed)).await?;
    tx.commit().await.map_err(hookgate_shared::store::StoreError::from)?;
    tracing::info!(endpoint = %ep.id, enabled = saved.enabled, "transformation saved");
    Ok(HttpResponse::NoContent().finish())
}
