//! The door of a source: which source a request's path names, whether the door
//! opens (an ingest source's only with its token), and the services a route uses.
//! Also `GET /in/{source_id}/{token}`: the subscription checks some senders make
//! before they send (Meta's `hub.challenge`, Adobe Sign's client id).

use std::sync::Arc;

use actix_web::{get, web, HttpRequest, HttpResponse};
use hookgate_egress::deliver::forward::Forwarder;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::SourceId,
    source::Provider,
    store::{sources, sources::Source, StoreError},
    AppState,
};
use serde::Deserialize;

use crate::{alerts::Alerts, commit::GroupCommit, metrics::IngressMetrics, secrets, verify};

/// The services the door uses, as actix hands them to a route.
pub struct Door {
    pub(crate) state: web::Data<AppState>,
    pub(crate) metrics: web::Data<IngressMetrics>,
    pub(crate) forwarder: web::Data<Forwarder>,
    pub(crate) group: web::Data<GroupCommit>,
    pub(crate) alerts: web::Data<Alerts>,
    pub(crate) certs: web::Data<verify::Certificates>,
}

impl actix_web::FromRequest for Door {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let data = || {
            Ok::<_, actix_web::Error>(Door {
                state: data(req)?,
                metrics: data(req)?,
                forwarder: data(req)?,
                group: data(req)?,
                alerts: data(req)?,
                certs: data(req)?,
            })
        };
        std::future::ready(data())
    }
}

fn data<T: 'static>(req: &HttpRequest) -> Result<web::Data<T>, actix_web::Error> {
    req.app_data::<web::Data<T>>()
        .cloned()
        .ok_or_else(|| actix_web::error::ErrorInternalServerError("a service of the ingress is not configured"))
}

/// The live source the path names if its door opens with `token`; `None` for
/// a malformed id, an unknown source, or a door that does not open.
pub(crate) async fn source_at(
    state: &AppState,
    path: &str,
    token: Option<&str>,
) -> Result<Option<Arc<Source>>, StoreError> {
    // Parsed at the edge: a malformed id names no source, and reaches neither the
    // cache nor Postgres.
    let Ok(source_id) = SourceId::parse(path) else { return Ok(None) };
    let found = match state.caches.sources.get(&source_id) {
        Some(cached) => cached,
        None => {
            let lookup = async {
                let conn = db::conn(&state.db).await?;
                Ok(sources::resolve(&**conn, &source_id).await?.map(Arc::new))
            };
            // A source found live lately is looked up at once; an unknown id waits
            // its turn at the pre-auth gate, so a flood of them cannot take the pool.
            let known = state.caches.known_sources.get(&source_id).is_some();
            let found = db::bounded(state.db_budget(), state.pre_auth.run_unless_known(known, lookup)).await?;
            if found.is_some() {
                state.caches.known_sources.insert_evicting(source_id.clone(), ());
            }
            state.caches.sources.insert(source_id, found.clone());
            found
        }
    };
    Ok(found.filter(|s| opens(state, s, token)))
}

/// Whether a request with `token` (from its path) may reach this source: an
/// ingest source with its token, any other without one.
fn opens(state: &AppState, source: &Source, token: Option<&str>) -> bool {
    match (&source.ingest, token) {
        (None, None) => true,
        // A cron source has no door: Hookgate emits its events itself.
        (Some(i), Some(t)) => i.type_name != "cron" && secrets::token_accepted(state, source, t),
        _ => false,
    }
}

/// The client id to echo to Adobe Sign: the request's, once checked.
pub(crate) fn adobe_sign_echo(req: &HttpRequest, source: &Source) -> Option<String> {
    if source.provider != Provider::AdobeSign {
        return None;
    }
    req.headers().get("x-adobesign-clientid").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// Meta's check of a URL (`hub.mode=subscribe`, its verify token, a challenge to echo).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Subscribe {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// Adobe Sign's check, answered: its client id, echoed.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AdobeSignEcho {
    #[serde(rename = "xAdobeSignClientId")]
    x_adobe_sign_client_id: String,
}

/// A sender's check of an ingest source's URL before it sends: Meta's
/// `hub.mode=subscribe` with the verify token (answered with `hub.challenge`),
/// Adobe Sign's client id (echoed). Anything else: 404.
#[utoipa::path(
    tag = "Receiving",
    operation_id = "hookgate.in.subscribe",
    security(()),
    params(Subscribe),
    responses((
        status = 200,
        description = "Meta: `hub.challenge`, echoed as text; Adobe Sign: the client id, echoed as JSON",
        content((String = "text/plain"), (AdobeSignEcho = "application/json"))
    ))
)]
#[get("/in/{source_id}/{token}")]
pub async fn subscribe(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, token) = path.into_inner();
    let source = match source_at(&state, &id, Some(&token)).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(ApiError::NotFound("source")),
        Err(e) => return Err(e.into()),
    };
    match source.provider {
        Provider::Meta => {
            let q = web::Query::<Subscribe>::from_query(req.query_string())
                .map_err(|e| ApiError::BadRequest(format!("the query: {e}")))?;
            // Meta's challenge is digits; nothing else is reflected.
            let challenge = q.challenge.as_deref().filter(|c| {
                !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
            let (Some("subscribe"), Some(presented), Some(challenge)) =
                (q.mode.as_deref(), q.verify_token.as_deref(), challenge)
            else {
                return Err(ApiError::BadRequest(
                    "`hub.mode=subscribe`, `hub.verify_token` and `hub.challenge` are needed".into(),
                ));
            };
            if !secrets::verify_token_accepted(&state, &source, presented) {
                return Err(ApiError::Forbidden("the verify token does not match".into()));
            }
            Ok(HttpResponse::Ok()
                .content_type("text/plain; charset=utf-8")
                .insert_header(("X-Content-Type-Options", "nosniff"))
                .body(challenge.to_owned()))
        }
        Provider::AdobeSign => {
            let valid = secrets::valid_secrets(&state, &source).map_err(ApiError::Internal)?;
            let presented = req.headers().get("x-adobesign-clientid").and_then(|v| v.to_str().ok()).unwrap_or_default();
            if verify::token_matches(&valid, Some(presented), "x-adobesign-clientid").is_err() {
                return Err(ApiError::Forbidden("`X-AdobeSign-ClientId` is not this source's client id".into()));
            }
            Ok(HttpResponse::Ok()
                .insert_header(("X-AdobeSign-ClientId", presented.to_owned()))
                .json(AdobeSignEcho { x_adobe_sign_client_id: presented.to_owned() }))
        }
        _ => Err(ApiError::NotFound("route")),
    }
}
