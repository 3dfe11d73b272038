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
    store::{sources, sources::Source, StoreError},
    AppState,
};
use serde::Deserialize;

use crate::{
    alerts::Alerts,
    commit::GroupCommit,
    metrics::IngressMetrics,
    secrets,
    verify::{self, UrlAnswer, UrlCheck, UrlRefused},
};

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

/// The header a source's provider echoes on an admitted event's answer (Adobe
/// Sign's client id), with the request's value; the request was verified.
pub(crate) fn echoed(req: &HttpRequest, source: &Source) -> Option<(&'static str, String)> {
    let name = verify::preset(&source.provider).door.echo_header?;
    req.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| (name, v.to_owned()))
}

/// Meta's check of a URL (`hub.mode=subscribe`, its verify token, a challenge to
/// echo), as the OpenAPI document shows the query (`verify::meta` reads the
/// query itself: keep the two alike).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct Subscribe {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// Adobe Sign's check, answered: its client id, echoed (as `verify::token` makes it).
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
    let Some(check) = verify::preset(&source.provider).door.url_check else {
        return Err(ApiError::NotFound("route"));
    };
    let answer = check(&UrlCheck {
        query: req.query_string(),
        headers: req.headers(),
        verify_token: &|presented| secrets::verify_token_accepted(&state, &source, presented),
        secret: &|presented| {
            let valid = secrets::valid_secrets(&state, &source)?;
            Ok(verify::token_matches(&valid, Some(presented), "secret").is_ok())
        },
    });
    match answer {
        Ok(UrlAnswer::Text(text)) => Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("X-Content-Type-Options", "nosniff"))
            .body(text)),
        Ok(UrlAnswer::Json { header, body }) => Ok(HttpResponse::Ok().insert_header(header).json(body)),
        Err(UrlRefused::Malformed(why)) => Err(ApiError::BadRequest(why)),
        Err(UrlRefused::NotOurs(why)) => Err(ApiError::Forbidden(why)),
        Err(UrlRefused::Broken(why)) => Err(ApiError::Internal(why)),
    }
}
