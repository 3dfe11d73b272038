//! What Svix Ingest has beside sources and endpoints: an ingest endpoint's
//! transformation, and the source's consumer portal (`dashboard`).

use actix_web::{get, patch, post, web, HttpMessage, HttpRequest, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{EndpointId, Ref, SourceId},
    store::applications,
    AppState,
};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::endpoints::{find, source_app};
use crate::v1::portal::{mint, Minted, PortalAccessOut};
use crate::v1::transformations::{get_of, patch_of, EndpointTransformationOut, TransformationPatch};
use crate::{optional_json, KeyAuth, Principal, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_transformation).service(patch_transformation).service(dashboard);
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
