//! `Idempotency-Key` on POSTs: the first request runs and its response
//! is kept; the same key with the same request replays it with
//! `Idempotent-Replayed: true`; with another request it answers 422; while the
//! first still runs, 409. Keys are scoped to the caller's principal.
//!
//! Runs inside the auth middleware, which has set the [`Principal`].

use actix_web::{
    body::{self, BoxBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    http::{header::HeaderName, Method, StatusCode},
    middleware::Next,
    web, Error, HttpMessage, HttpResponse, ResponseError,
};
use hookgate_shared::{
    db,
    http::{ApiError, REQUEST_ID},
    store::idempotency::{self, Claim, Server, StoredResponse},
    AppState,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio_postgres::GenericClient;

use crate::{
    auth::reject,
    idempotency_settle::{settle, End, Held},
    Principal,
};

const KEY_HEADER: &str = "idempotency-key";

/// The `Idempotency-Key` a request runs under and this request's claim on it, for
/// handlers that commit their response with their effect ([`answer`]) or store
/// the key on it (message creation), so that the request cannot run twice.
#[derive(Debug, Clone)]
pub struct RequestKey {
    pub key: String,
    scope: String,
    token: i64,
}

impl RequestKey {
    /// The key as a message stores it: the tenant's own as given, any other
    /// caller's (a portal link, a message token) under its scope, so that two
    /// callers' equal keys never name each other's messages.
    pub fn message_key(&self) -> String {
        match self.scope.contains('/') {
            true => format!("{}:{}", self.scope, self.key),
            false => self.key.clone(),
        }
    }
}

/// Set on a response whose handler already kept it under its key, in its own
/// transaction: the middleware does not store it again.
#[derive(Debug, Clone, Copy)]
struct Kept;

/// Set on a response whose effect stores its request's key (message creation):
/// a retry finds the effect by the key, so releasing the key is always safe.
#[derive(Debug, Clone, Copy)]
pub struct CarriesKey;

/// A handler's JSON answer, kept under its `Idempotency-Key` (if the request has
/// one) by `tx`, the handler's own transaction, before it commits. The effect and
/// its replay commit together: a crash before the commit leaves neither (the
/// retry runs), after it both (the retry replays), never the effect alone. If
/// this request's claim was taken over meanwhile, it fails with 409 and the
/// handler's transaction, dropped uncommitted, leaves no effect.
pub async fn answer(
    tx: &impl GenericClient,
    state: &AppState,
    key: Option<&RequestKey>,
    status: StatusCode,
    body: &impl Serialize,
) -> Result<HttpResponse, ApiError> {
    let bytes = serde_json::to_vec(body).map_err(|e| ApiError::Internal(e.to_string()))?;
    keep(tx, state, key, status, vec![("content-type".into(), "application/json".into())], &bytes).await?;
    let mut res = HttpResponse::build(status).content_type("application/json").body(bytes);
    res.extensions_mut().insert(Kept);
    Ok(res)
}

/// [`answer`] for an answer without a body (a 204): stored with its effect, in
/// the caller's transaction, so a retry under the same key replays it and never
/// runs the effect twice.
pub async fn answer_empty(
    tx: &impl GenericClient,
    state: &AppState,
    key: Option<&RequestKey>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    keep(tx, state, key, status, vec![], b"").await?;
    let mut res = HttpResponse::build(status).finish();
    res.extensions_mut().insert(Kept);
    Ok(res)
}

/// Stores the answer under the request's key (if it has one), sealed, in `tx`;
/// 409 if a retry took the key over meanwhile.
async fn keep(
    tx: &impl GenericClient,
    state: &AppState,
    key: Option<&RequestKey>,
    status: StatusCode,
    headers: Vec<(String, String)>,
    body: &[u8],
) -> Result<(), ApiError> {
    let Some(k) = key else { return Ok(()) };
    let stored = StoredResponse {
        status: status.as_u16(),
        headers,
        body: state.config.master_key.replay_key(&k.scope).seal(&replay_purpose(&k.scope, &k.key), body),
    };
    // In the handler's own transaction: the answer commits with its effect, on
    // whichever server that is.
    if !idempotency::finish(tx, &k.scope, &k.key, k.token, None, &stored).await? {
        return Err(ApiError::Conflict(
            "this request outlived its Idempotency-Key, which a retry has taken over; its effect was rolled back"
                .into(),
        ));
    }
    Ok(())
}

const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
const MAX_KEY_LEN: usize = 255;

pub async fn idempotency(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let parsed = match req.headers().get(KEY_HEADER) {
        Some(v) if req.method() == Method::POST => parse_key(v.as_bytes()),
        _ => return Ok(next.call(req).await?.map_into_boxed_body()),
    };
    let key = match parsed {
        Ok(k) => k,
        Err(e) => return reject(req, e),
    };
    let scope = req.extensions().get::<Principal>().map(Principal::scope);
    let Some(scope) = scope else {
        return reject(req, ApiError::Unauthorized("authentication is required".into()));
    };
    let state = req.app_data::<web::Data<AppState>>().cloned().expect("AppState is registered");
    // Taken before the claim is made: the settler then gives up a little early, never late.
    let claimed = std::time::Instant::now();
    let (body, token, server) = match claim(&mut req, &state, &scope, &key).await {
        Ok(Ok(run)) => run,
        Ok(Err(stored)) => return Ok(req.into_response(replay(&state, &scope, &key, stored))),
        Err(e) => return reject(req, e),
    };
    req.set_payload(Payload::from(body));
    // Handlers whose effect can carry the key (message creation) make a retry find it.
    req.extensions_mut().insert(RequestKey { key: key.clone(), scope: scope.clone(), token });
    let held = Held { scope, key, token, claimed, server };
    match next.call(req).await {
        Ok(res) => Ok(remember(&state, &held, res.map_into_boxed_body()).await),
        Err(e) => {
            forget(&state, &held).await;
            Err(e)
        }
    }
}

/// Reads the body and claims the key: `Ok(body)` to run the request,
/// `Err(stored)` to replay an earlier response.
async fn claim(
    req: &mut ServiceRequest,
    state: &AppState,
    scope: &str,
    key: &str,
) -> Result<Result<(web::Bytes, i64, Server), StoredResponse>, ApiError> {
    let body = read_body(req, state.config.max_body).await?;
    let target = req.uri().path_and_query().map_or("", |p| p.as_str());
    let prints =
        [fingerprint(req.method(), req.path(), target, &body), legacy_fingerprint(req.method(), target, &body)];
    // Bounded like every wait on Postgres; no connection is held while the handler runs.
    let claim = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        idempotency::claim(&**conn, scope, key, &prints, state.config.idempotency_ttl).await
    })
    .await?;
    match claim {
        Claim::Run(token, server) => Ok(Ok((body, token, server))),
        Claim::Replay(stored) => Ok(Err(stored)),
        Claim::Mismatch => Err(ApiError::IdempotencyMismatch),
        Claim::Running => Err(ApiError::IdempotencyInFlight),
    }
}

async fn forget(state: &AppState, held: &Held) {
    settle(state, held, End::Release).await;
}

fn parse_key(raw: &[u8]) -> Result<String, ApiError> {
    let ok = !raw.is_empty() && raw.len() <= MAX_KEY_LEN && raw.iter().all(|b| b.is_ascii_graphic());
    if !ok {
        return Err(ApiError::BadRequest(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
        )));
    }
    Ok(String::from_utf8(raw.to_vec()).expect("checked ASCII"))
}

pub(crate) async fn read_body(req: &mut ServiceRequest, limit: usize) -> Result<web::Bytes, ApiError> {
    let mut payload = req.take_payload();
    let mut buf = web::BytesMut::new();
    use futures_util::StreamExt;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("cannot read request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// What a key is bound to: the method and the path with its query. The body is
/// not, as Svix's keys are not: a retry whose body changed (a new timestamp in
/// it, say) gets the first answer again rather than a second effect. Except where
/// the answer is a credential ([`mints_credential`]): a request for a read-only
/// or shorter-lived token must not be answered with the read-write one an
/// earlier body asked for, so there the body counts too.
fn fingerprint(method: &Method, path: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"v2\0");
    h.update(method.as_str());
    h.update([0]);
    h.update(target);
    if mints_credential(path) {
        h.update([0]);
        h.update(body);
    }
    h.finalize().to_vec()
}

/// The fingerprint the previous release stored (method, path and body): a
/// retry of the very same request across an upgrade still finds its key.
fn legacy_fingerprint(method: &Method, target: &str, body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(method.as_str());
    h.update([0]);
    h.update(target);
    h.update([0]);
    h.update(body);
    h.finalize().to_vec()
}

/// The `POST`s whose answer carries a credential shaped by the body: a tenant
/// and its first API key, an API key, a portal token (Svix's and an ingest
/// source's dashboard), an integration's key, a signing secret the body may
/// choose. A path with a `%` escape is taken as one too: the router decodes it,
/// this check would not.
fn mints_credential(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path.contains('%')
        || path == "/admin/v1/tenant"
        || path.ends_with("/api-key")
        || path.ends_with("/integration")
        || path.ends_with("/key/rotate")
        || path.ends_with("/secret/rotate")
        || path.ends_with("/dashboard")
        || path.starts_with("/api/v1/auth/app-portal-access/")
        || path.starts_with("/api/v1/auth/dashboard-access/")
        || path.ends_with("/create-message-token")
        || path.ends_with("/token/rotate")
}

/// Keeps the response for replay, or releases the key after a server-side failure
/// so that the client's retry runs again.
async fn remember(state: &AppState, held: &Held, res: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    if res.response().extensions().get::<Kept>().is_some() {
        return res;
    }
    let (scope, key) = (held.scope.as_str(), held.key.as_str());
    let status = res.status();
    let (http_req, response) = res.into_parts();
    let (head, body) = response.into_parts();
    let bytes = match body::to_bytes(body).await {
        Ok(b) => b,
        Err(_) => web::Bytes::new(),
    };
    // Only a success is kept, as Svix keeps only those: after a 4xx (nothing was
    // done) the retry runs again, so a corrected body is not answered the first
    // refusal; after a 5xx or a 429 (a quota said "later") it must run again too.
    if !status.is_success() {
        forget(state, held).await;
        return ServiceResponse::new(http_req, head.set_body(bytes).map_into_boxed_body());
    }
    // Sealed at rest: a replayed body may hold an API key, a signing secret or a
    // portal token. The purpose binds it to its scope and key.
    let sealed = state.config.master_key.replay_key(scope).seal(&replay_purpose(scope, key), &bytes);
    let stored = StoredResponse { status: status.as_u16(), headers: kept_headers(&head), body: sealed };
    // The response stands either way; if Postgres cannot keep it now, it is kept
    // as soon as it can, by the server that took the claim (until then a retry
    // is answered 409, up to the takeover age). On another (a standby promoted meanwhile, which may lack
    // the effect), an answer whose effect carries the key (a message) releases it
    // instead: the retry then finds the effect, or makes it if it was lost.
    let carries_key = head.extensions().get::<CarriesKey>().is_some();
    settle(state, held, End::Keep { stored, else_release: carries_key }).await;
    ServiceResponse::new(http_req, head.set_body(bytes).map_into_boxed_body())
}

fn kept_headers(res: &HttpResponse<()>) -> Vec<(String, String)> {
    res.headers()
        .iter()
        .filter(|(name, _)| *name != REQUEST_ID && name.as_str() != "date")
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect()
}

fn replay_purpose(scope: &str, key: &str) -> String {
    format!("idempotency-replay:{scope}:{key}")
}

fn replay(state: &AppState, scope: &str, key: &str, mut stored: StoredResponse) -> HttpResponse {
    match state.config.master_key.replay_key(scope).open(&replay_purpose(scope, key), &stored.body) {
        Ok(body) => stored.body = body,
        // Kept in clear before replies were sealed (at most a TTL ago): JSON, or empty.
        Err(_) if stored.body.is_empty() || serde_json::from_slice::<serde::de::IgnoredAny>(&stored.body).is_ok() => {}
        // Sealed under another master key: ciphertext is no answer to replay.
        Err(e) => {
            tracing::error!(error = %e, "a kept Idempotency-Key response cannot be opened");
            return ApiError::Coded {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                code: "idempotency_replay_unreadable",
                detail: "the response kept for this Idempotency-Key cannot be opened; was HOOKGATE_MASTER_KEY changed?"
                    .into(),
            }
            .error_response();
        }
    }
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut res = HttpResponse::build(status);
    for (name, value) in &stored.headers {
        res.append_header((name.as_str(), value.as_str()));
    }
    res.insert_header((REPLAYED, "true"));
    res.body(stored.body)
}
