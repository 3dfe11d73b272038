//! `POST …/app/{app}/filter/try`: a content filter run on a payload exactly as
//! the fan-out runs it (Postgres evaluates the compiled predicate), for the
//! portal's editor and for checking a filter before saving it.

use actix_web::{post, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, Ref},
    store::fanout,
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{applications, validate};
use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(try_filter);
}

/// The most a tried payload may weigh, serialised.
const MOST_PAYLOAD: usize = 256 * 1024;

/// A filter and a payload to run it on.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = FilterTryIn)]
struct TryIn {
    filter: String,
    #[schema(value_type = Object)]
    payload: serde_json::Value,
}

/// Whether a message with that payload would pass the filter.
#[derive(Serialize, ToSchema)]
#[schema(as = FilterTryOut)]
struct TryOut {
    matches: bool,
}

/// Runs a content filter on a payload: `{"matches": true}` if a message with it
/// would be delivered (as far as the filter goes); 422 naming what is wrong
/// with the filter, and where.
#[utoipa::path(tag = "Endpoint", operation_id = "hookgate.filter.try", request_body = TryIn, responses((status = 200, body = TryOut)))]
#[post("/app/{app_id}/filter/try")]
async fn try_filter(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<TryIn>,
) -> Result<HttpResponse, ApiError> {
    let filter = validate::filter(Some(&body.filter))?.ok_or(ApiError::Validation("`filter` is empty".into()))?;
    let payload = serde_json::to_vec(&body.payload).expect("a JSON value serialises");
    if payload.len() > MOST_PAYLOAD {
        return Err(ApiError::Validation(format!("`payload` is at most {MOST_PAYLOAD} bytes here")));
    }
    // Another tenant's application answers 404 like a missing one.
    applications::find(&state, &tenant, &path).await?;
    let conn = db::conn(&state.db).await?;
    let matches = fanout::filter_passes(&**conn, &payload, &filter.path).await?;
    Ok(HttpResponse::Ok().json(TryOut { matches }))
}
