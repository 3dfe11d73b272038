//! An endpoint's signing secret: `v1.endpoint.get-secret` and `rotate-secret`, the old
//! secret signing beside the new one for the grace period.

use hookgate_shared::ids::{AppId, EndpointId, Ref, TenantId};
use hookgate_shared::store::endpoints::Endpoint;

use crate::idempotency::{answer, answer_empty, RequestKey};
use crate::{optional_json, TenantAuth};
use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::store::StoreError;
use hookgate_shared::{db, http::ApiError, store::endpoints, AppState};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::crud::{find, Notify};
use crate::v1::validate::RotateIn;
use hookgate_egress::{secrets, signing::EndpointSecret};
use hookgate_shared::store::operational::Notice;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_secret).service(rotate_secret);
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// An endpoint's signing secret, or the public key that verifies its signatures.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndpointSecretOut {
    /// `whsec_` and the HMAC secret, base64; for an Ed25519 (`whsk_`) secret,
    /// `whpk_` and its 32-byte public key, base64 (the secret key is never shown).
    key: String,
}

/// The endpoint's signing secret.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-secret", responses((status = 200, body = EndpointSecretOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/secret")]
async fn get_secret(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    secret_answer(&state, &tenant.0, &app, &ep)
}

/// `{"key": …}`: the endpoint's signing secret, opened, or its public key.
pub(crate) fn secret_answer(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
) -> Result<HttpResponse, ApiError> {
    let secret = secrets::open_secret(state, tenant, app, &ep.id, &ep.secret)
        .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?;
    Ok(HttpResponse::Ok().json(EndpointSecretOut { key: secret.shown() }))
}

/// The secret a rotation sets: the body's key (422 saying what is wrong with
/// it), or a new one of the operator's default kind.
pub(crate) fn rotated_secret(state: &AppState, body: &RotateIn) -> Result<EndpointSecret, ApiError> {
    EndpointSecret::given_or_new(body.key.as_deref(), state.config.default_signature_type)
        .map_err(|e| ApiError::Validation(e.to_string()))
}

/// The old secret keeps signing, beside the new one, for the grace period (24 h by default).
/// Answers 200 with the new key (an Ed25519 key's `whpk_` public key): current Svix SDKs parse a body here.
#[utoipa::path(
    tag = "Endpoint",
    operation_id = "v1.endpoint.rotate-secret",
    request_body(content = Option<RotateIn>, description = "optional: an empty body rotates to a new key"),
    responses((status = 200, body = EndpointSecretOut))
)]
#[post("/app/{app_id}/endpoint/{endpoint_id}/secret/rotate")]
async fn rotate_secret(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let rotation = Rotation::asked(&state, &optional_json(&body)?)?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    rotate(&state, &tenant.0, &app, &ep.id, rotation, key.as_deref(), Rotated::ShowKey).await
}

/// What a rotation answers: the new key (200, as current Svix SDKs parse), or
/// nothing (204, as the ingest API does).
pub(crate) enum Rotated {
    ShowKey,
    NoContent,
}

/// A rotation's body, checked (before the endpoint is looked up): the new secret
/// and until when the old one signs beside it.
pub(crate) struct Rotation {
    secret: EndpointSecret,
    until: DateTime<Utc>,
}

impl Rotation {
    pub(crate) fn asked(state: &AppState, body: &RotateIn) -> Result<Rotation, ApiError> {
        Ok(Rotation { until: body.old_secret_until()?, secret: rotated_secret(state, body)? })
    }
}

/// Rotates an endpoint's secret, with its `endpoint.updated` notice and the
/// answer under the request's key in the same commit.
pub(crate) async fn rotate(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &EndpointId,
    Rotation { secret, until }: Rotation,
    key: Option<&RequestKey>,
    answered: Rotated,
) -> Result<HttpResponse, ApiError> {
    let sealed = secrets::seal(state, tenant, app, ep, &secret);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !endpoints::rotate_secret(&*tx, tenant, app, ep, &sealed, until).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    // Svix tells a rotation as `endpoint.updated`.
    let notice = Notice::endpoint(tenant, "endpoint.updated", app, ep);
    let woke = crate::v1::endpoint::rows::notice(&*tx, Notify::Yes, notice).await?;
    let res = match answered {
        Rotated::ShowKey => {
            answer(&*tx, state, key, StatusCode::OK, &EndpointSecretOut { key: secret.shown() }).await?
        }
        Rotated::NoContent => answer_empty(&*tx, state, key, StatusCode::NO_CONTENT).await?,
    };
    crate::v1::endpoint::rows::commit(tx, state, woke).await?;
    Ok(res)
}
