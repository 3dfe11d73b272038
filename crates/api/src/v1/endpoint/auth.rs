//! `v1.endpoint.*-oauth*`, `*-mtls*`, `*-server-ca`: how Hookgate authenticates to
//! an endpoint beyond its signature. Secrets are sealed and never answered.

use actix_web::{delete, get, put, web, HttpResponse};
use hookgate_egress::auth::{self, oauth, tls};
use hookgate_shared::{
    db,
    endpoint_auth::{AuthMethod, OauthConfigIn, OauthConfigOut, OauthSecrets, OauthSettings},
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{
        endpoint_auth::{self as store, AuthRow, Change},
        endpoints::Endpoint,
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::endpoint::crud::{allowed, find};
use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_oauth)
        .service(set_oauth)
        .service(delete_oauth)
        .service(oauth_status)
        .service(get_mtls)
        .service(set_mtls)
        .service(delete_mtls)
        .service(mtls_status)
        .service(get_ca)
        .service(set_ca);
}

type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// Whether OAuth is set, and how (never a secret).
#[derive(Serialize, ToSchema)]
#[schema(as = EndpointOauthOut)]
struct OauthStatus {
    enabled: bool,
    config: Option<OauthConfigOut>,
}

/// `identity`: a PEM private key and certificate chain that identify Hookgate to the endpoint.
#[derive(Deserialize, ToSchema)]
#[schema(as = EndpointMtlsConfigIn)]
struct MtlsIn {
    identity: String,
}

/// What is shown of a client certificate: nothing (its key is a secret, as Svix answers).
#[derive(Serialize, ToSchema)]
#[schema(as = EndpointMtlsConfigOut)]
struct MtlsOut {}

#[derive(Serialize, ToSchema)]
#[schema(as = EndpointMtlsOut)]
struct MtlsStatus {
    enabled: bool,
    config: Option<MtlsOut>,
}

/// `cert`: PEM certificates the endpoint's certificate must chain to; `null`: the system's roots.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = EndpointServerCaInOut)]
struct CaInOut {
    #[serde(default)]
    cert: Option<String>,
}

/// An HTTP endpoint of the tenant (a FIFO or polling endpoint has none of this).
async fn endpoint(state: &AppState, tenant: &TenantAuth, path: &EpPath) -> Result<(AppId, Endpoint), ApiError> {
    let (app, ep) = find(state, tenant, &path.0, &path.1).await?;
    if ep.kind.is_sink() {
        return Err(ApiError::Conflict(format!(
            "a {} takes no OAuth client, client certificate or server CA (only HTTP endpoints do)",
            ep.kind.type_name().unwrap_or_default()
        )));
    }
    Ok((app, ep))
}

async fn read(state: &AppState, tenant: &TenantId, app: &AppId, ep: &Endpoint) -> Result<AuthRow, ApiError> {
    let conn = db::conn(&state.db).await?;
    Ok(store::get(&**conn, tenant, app, &ep.id).await?.unwrap_or_default())
}

async fn write(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
    c: Change<'_>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    if !store::change(&*tx, tenant, app, &ep.id, c).await? {
        return Err(ApiError::NotFound("endpoint"));
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::NoContent().finish())
}

/// The OAuth settings as answered: no secret, and the extra headers by name only.
fn shown(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
    row: &AuthRow,
) -> Result<Option<OauthConfigOut>, ApiError> {
    let Some(settings) = &row.oauth else { return Ok(None) };
    let settings: OauthSettings = serde_json::from_value(settings.clone())
        .map_err(|e| ApiError::Internal(format!("stored OAuth settings: {e}")))?;
    let secrets: OauthSecrets = match &row.oauth_secrets {
        Some(s) => auth::open(state, tenant, app, &ep.id, "oauth", s)
            .and_then(|s| serde_json::from_slice(&s).map_err(|e| e.to_string()))
            .map_err(ApiError::Internal)?,
        None => OauthSecrets::default(),
    };
    Ok(Some(settings.shown(secrets.extra_headers)))
}

/// The endpoint's OAuth client; 404 when it has none.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-oauth", responses((status = 200, body = OauthConfigOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/oauth")]
async fn get_oauth(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    let row = read(&state, &tenant.0, &app, &ep).await?;
    let config = shown(&state, &tenant.0, &app, &ep, &row)?.ok_or(ApiError::NotFound("OAuth configuration"))?;
    Ok(HttpResponse::Ok().json(config))
}

/// Whether the endpoint has an OAuth client, and how (200 either way).
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-oauth-2", responses((status = 200, body = OauthStatus)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/oauth-config")]
async fn oauth_status(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    let row = read(&state, &tenant.0, &app, &ep).await?;
    let config = shown(&state, &tenant.0, &app, &ep, &row)?;
    Ok(HttpResponse::Ok().json(OauthStatus { enabled: config.is_some(), config }))
}

/// Sets the endpoint's OAuth client: deliveries then carry `Authorization: Bearer`
/// with a token from `tokenUrl`, fetched once and shared until it is due for refresh.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.set-oauth-config", request_body = OauthConfigIn, responses((status = 204, description = "saved")))]
#[put("/app/{app_id}/endpoint/{endpoint_id}/oauth")]
async fn set_oauth(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<OauthConfigIn>,
) -> Result<HttpResponse, ApiError> {
    let (settings, secrets) = body.into_inner().split().map_err(ApiError::Validation)?;
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    // The token URL is reached as the endpoint is: an address the tenant may not reach is refused now.
    let guard = allowed(&state, &tenant.0).await?;
    let url = url::Url::parse(&settings.token_url).map_err(|e| ApiError::Validation(e.to_string()))?;
    guard.check_url(&url).map_err(|b| ApiError::Validation(format!("`tokenUrl` is refused: {b}")))?;
    if settings.auth_method == AuthMethod::ClientSecretJwt {
        oauth::rsa_key(secrets.jwt_key_base64.as_deref().unwrap_or_default()).map_err(ApiError::Validation)?;
    }
    let clear = serde_json::to_value(&settings).expect("settings serialise");
    let sealed =
        auth::seal(&state, &tenant.0, &app, &ep.id, "oauth", &serde_json::to_vec(&secrets).expect("secrets serialise"));
    write(&state, &tenant.0, &app, &ep, Change::Oauth(Some((&clear, &sealed)))).await
}

/// Removes the endpoint's OAuth client (and the token held for it).
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.delete-oauth-config", responses((status = 204, description = "removed")))]
#[delete("/app/{app_id}/endpoint/{endpoint_id}/oauth")]
async fn delete_oauth(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    write(&state, &tenant.0, &app, &ep, Change::Oauth(None)).await
}

/// The endpoint's client certificate: `{}` (nothing of it is shown); 404 when it has none.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-mtls", responses((status = 200, body = MtlsOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/mtls")]
async fn get_mtls(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    match read(&state, &tenant.0, &app, &ep).await?.mtls_identity {
        Some(_) => Ok(HttpResponse::Ok().json(MtlsOut {})),
        None => Err(ApiError::NotFound("mTLS configuration")),
    }
}

/// Whether the endpoint has a client certificate (200 either way).
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-mtls-2", responses((status = 200, body = MtlsStatus)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/mtls-config")]
async fn mtls_status(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    let enabled = read(&state, &tenant.0, &app, &ep).await?.mtls_identity.is_some();
    Ok(HttpResponse::Ok().json(MtlsStatus { enabled, config: enabled.then_some(MtlsOut {}) }))
}

/// Sets the client certificate Hookgate presents when the endpoint asks for one.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.set-mtls-config", request_body = MtlsIn, responses((status = 204, description = "saved")))]
#[put("/app/{app_id}/endpoint/{endpoint_id}/mtls")]
async fn set_mtls(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<MtlsIn>,
) -> Result<HttpResponse, ApiError> {
    tls::check_identity(body.identity.as_bytes()).map_err(ApiError::Validation)?;
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    let sealed = auth::seal(&state, &tenant.0, &app, &ep.id, "mtls", body.identity.as_bytes());
    write(&state, &tenant.0, &app, &ep, Change::Mtls(Some(&sealed))).await
}

/// Removes the client certificate.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.delete-mtls-config", responses((status = 204, description = "removed")))]
#[delete("/app/{app_id}/endpoint/{endpoint_id}/mtls")]
async fn delete_mtls(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    write(&state, &tenant.0, &app, &ep, Change::Mtls(None)).await
}

/// The CA the endpoint's certificate must chain to; `null`: the system's roots.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-server-ca", responses((status = 200, body = CaInOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/ca")]
async fn get_ca(tenant: TenantAuth, state: web::Data<AppState>, path: EpPath) -> Result<HttpResponse, ApiError> {
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    let cert = read(&state, &tenant.0, &app, &ep).await?.server_ca;
    Ok(HttpResponse::Ok().json(CaInOut { cert }))
}

/// Sets (or, with `null`, removes) the CA the endpoint's certificate must chain to.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.set-server-ca", request_body = CaInOut, responses((status = 204, description = "saved")))]
#[put("/app/{app_id}/endpoint/{endpoint_id}/ca")]
async fn set_ca(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<CaInOut>,
) -> Result<HttpResponse, ApiError> {
    if let Some(pem) = &body.cert {
        tls::check_ca(pem).map_err(ApiError::Validation)?;
    }
    let (app, ep) = endpoint(&state, &tenant, &path).await?;
    write(&state, &tenant.0, &app, &ep, Change::Ca(body.cert.as_deref())).await
}
