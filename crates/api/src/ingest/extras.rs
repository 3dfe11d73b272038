//! What Svix Ingest has beside sources and endpoints: a source's PATCH, an
//! ingest endpoint's transformation, and the source's consumer portal (`dashboard`).

use actix_web::{get, patch, post, web, HttpMessage, HttpRequest, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{EndpointId, Ref, SourceId},
    store::applications,
    AppState,
};
use serde::Deserialize;
use std::collections::HashMap;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::endpoints::{find, source_app};
use super::sources::{out, IngestSourceOut};
use crate::v1::portal::{mint, Minted, PortalAccessOut};
use crate::v1::transformations::{get_of, patch_of, EndpointTransformationOut, TransformationPatch};
use crate::v1::validate;
use crate::{optional_json, KeyAuth, Maybe, Principal, TenantAuth};
use hookgate_shared::store::{
    ingest_sources::{self, IngestFields},
    sources::SourceFields,
    StoreError,
};

/// Svix's `IngestSourcePatch`: the fields given replace the stored ones; `uid: null` clears it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = IngestSourcePatch)]
struct SourcePatch {
    name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    uid: Maybe<String>,
    metadata: Option<HashMap<String, String>>,
}

/// Changes a source's name, uid or metadata; its type, config, secret and token stay.
#[utoipa::path(tag = "Ingest Source", operation_id = "v1.ingest.source.patch", responses((status = 200, body = IngestSourceOut)))]
#[patch("/source/{source_id}")]
async fn patch_source(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<Ref<SourceId>>,
    body: web::Json<SourcePatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    if let Some(name) = &p.name {
        if name.trim().len() < 2 {
            return Err(ApiError::Validation("`name` must be 2 to 256 characters".into()));
        }
        validate::name("name", name.trim())?;
    }
    let uid = p.uid.into_update();
    if let Some(Some(uid)) = &uid {
        validate::uid("uid", uid)?;
        if uid.starts_with("src_") {
            return Err(ApiError::Validation("`uid` must not look like a source id (`src_…`)".into()));
        }
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let s = ingest_sources::get_for_update(&*tx, &key.0, &id).await?.ok_or(ApiError::NotFound("ingest source"))?;
    let facet = s.ingest.clone().ok_or(ApiError::NotFound("ingest source"))?;
    let uid = uid.unwrap_or(facet.uid);
    let metadata = match p.metadata {
        Some(m) => serde_json::to_value(m).expect("a map serialises"),
        None => facet.metadata,
    };
    let ingest =
        IngestFields { type_name: &facet.type_name, uid: uid.as_deref(), metadata: &metadata, config: &facet.config };
    let f = SourceFields {
        name: p.name.map(|n| n.trim().to_owned()).unwrap_or_else(|| s.name.clone()),
        provider: s.provider.clone(),
        allow_unverified: s.allow_unverified,
        public_url: s.public_url.clone(),
        idempotency: s.idempotency.clone(),
        mode: s.mode,
        app_id: s.app_id.clone(),
        event_type_path: s.event_type_path.clone(),
        retention_days: s.retention_days,
        disabled: s.disabled,
    };
    let saved = ingest_sources::replace(&*tx, &key.0, &s.id, &f, &ingest, None, &state.caches)
        .await
        .map_err(|e| validate::conflict("an ingest source with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("ingest source"))?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(out(&req, &state, saved)?))
}

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(patch_source).service(get_transformation).service(patch_transformation).service(dashboard);
}

/// The transformation run on each event the source admits before it is sent to
/// this endpoint: the endpoint's own, as `…/app/{app}/endpoint/{id}/transformation`.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.get-transformation", responses((status = 200, body = EndpointTransformationOut)))]
#[get("/source/{source_id}/endpoint/{endpoint_id}/transformation")]
async fn get_transformation(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    get_of(&TenantAuth(key.0), &req, &state, app, ep).await
}

/// Sets what the body gives of the endpoint's transformation and keeps the rest.
#[utoipa::path(tag = "Ingest Endpoint", operation_id = "v1.ingest.endpoint.set-transformation", responses((status = 204, description = "saved")))]
#[patch("/source/{source_id}/endpoint/{endpoint_id}/transformation")]
async fn patch_transformation(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<SourceId>, Ref<EndpointId>)>,
    body: web::Json<TransformationPatch>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &key.0, &path.0, &path.1).await?;
    // A tenant's own key sees every variable.
    let caller = crate::v1::transformation_try::Caller { hidden: false, portal: false };
    patch_of(&TenantAuth(key.0), &state, body.into_inner(), app, ep, caller).await
}

/// What the source's portal token may do, and for how long.
#[derive(Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = IngestSourceConsumerPortalAccessIn)]
struct DashboardIn {
    /// Seconds, 1 hour to 7 days; 7 days when absent.
    expiry: Option<i64>,
    read_only: Option<bool>,
}

/// The source's consumer portal: an app-portal token (and the portal's URL) for
/// the application that holds the source's endpoints, where its customer sees
/// what arrived and where it went.
#[utoipa::path(tag = "Ingest", operation_id = "v1.ingest.dashboard", request_body = Option<DashboardIn>, responses((status = 200, body = PortalAccessOut)))]
#[post("/source/{source_id}/dashboard")]
async fn dashboard(
    key: KeyAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<SourceId>>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let body: DashboardIn = optional_json(&body)?;
    let expiry = body.expiry.unwrap_or(7 * 86_400);
    if !(3600..=7 * 86_400).contains(&expiry) {
        return Err(ApiError::Validation("`expiry` must be between 3600 seconds (1 hour) and 604800 (7 days)".into()));
    }
    let minted_by = match req.extensions().get::<Principal>() {
        Some(Principal::Tenant { key, .. }) => key.clone(),
        _ => return Err(ApiError::Unauthorized("a tenant API key is required".into())),
    };
    let app_id = source_app(&state, &key.0, &path).await?;
    let app = {
        let conn = db::conn(&state.db).await?;
        applications::get(&**conn, &key.0, &Ref::Id(app_id)).await?.ok_or(ApiError::NotFound("ingest source"))?
    };
    let minted = Minted {
        expiry,
        feature_flags: Vec::new(),
        read_only: body.read_only.unwrap_or(false),
        session: String::new(),
    };
    Ok(HttpResponse::Ok().json(mint(&req, &state, &TenantAuth(key.0), &app, minted_by, minted)))
}
