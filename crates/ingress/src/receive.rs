//! `POST /in/{source_id}` (and an ingest source's `/in/{source_id}/{token}`): the
//! provider-facing door (which source, and whether it opens: `door.rs`). Bad input
//! is answered as the table in `docs/guarantees.md` says, and nothing is stored for it.

use std::time::Instant;

use actix_web::{http::StatusCode, post, web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use hookgate_egress::deliver::forward::Forwarder;
use hookgate_shared::{
    http::ApiError,
    inbound_keys,
    source::{KeySpec, Mode},
    store::{sources, StoreError},
    AppState,
};
use tracing::Instrument;

use hookgate_shared::{limits, quota::Limit, store::usage::Counter};

use crate::{
    admit::{self, Admitted, Candidate, Layer},
    commit::GroupCommit,
    door::Door,
    extract,
    key::{self, KeyKind},
    secrets, verify,
};

/// One request's outcome, as the metric and the answer name it.
enum Refusal {
    TooLarge(usize),
    Quota(hookgate_shared::quota::Exceeded),
    Signature(crate::verify::VerifyError),
    /// PayPal: the signing certificate could not be had now; the provider's retry may succeed.
    CertificateUnavailable(crate::verify::VerifyError),
    KeyMissing(String),
    BadRequest(String),
    Unavailable,
    Internal(String),
}

impl Refusal {
    fn outcome(&self) -> &'static str {
        match self {
            Refusal::TooLarge(_) => "too_large",
            Refusal::Quota(_) => "quota_exceeded",
            Refusal::Signature(_) => "invalid_signature",
            Refusal::KeyMissing(_) | Refusal::BadRequest(_) => "bad_request",
            Refusal::Unavailable | Refusal::CertificateUnavailable(_) => "unavailable",
            Refusal::Internal(_) => "error",
        }
    }

    /// The usage counter a refusal adds to, if it is the sender's doing.
    fn usage(&self) -> Option<Counter> {
        match self {
            Refusal::Signature(_) => Some(Counter::RejectedSignature),
            Refusal::TooLarge(_) | Refusal::KeyMissing(_) | Refusal::BadRequest(_) => Some(Counter::RejectedInvalid),
            Refusal::Quota(_) => Some(Counter::RejectedQuota),
            Refusal::Unavailable | Refusal::CertificateUnavailable(_) | Refusal::Internal(_) => None,
        }
    }

    fn into_api(self) -> ApiError {
        match self {
            Refusal::TooLarge(n) => ApiError::TooLarge(n),
            Refusal::Quota(e) => ApiError::Quota(e),
            Refusal::Signature(e) => {
                ApiError::Coded { status: StatusCode::UNAUTHORIZED, code: e.code(), detail: e.to_string() }
            }
            Refusal::CertificateUnavailable(e) => {
                ApiError::Coded { status: StatusCode::SERVICE_UNAVAILABLE, code: e.code(), detail: e.to_string() }
            }
            Refusal::KeyMissing(detail) => {
                ApiError::Coded { status: StatusCode::BAD_REQUEST, code: "idempotency_key_missing", detail }
            }
            Refusal::BadRequest(detail) => ApiError::BadRequest(detail),
            Refusal::Unavailable => ApiError::Unavailable,
            Refusal::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            Refusal::Unavailable
        } else {
            Refusal::Internal(e.to_string())
        }
    }
}

async fn read_body(mut payload: web::Payload, limit: usize) -> Result<Vec<u8>, Refusal> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Refusal::BadRequest(format!("cannot read the body: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(Refusal::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a sender is told of an admitted request (a provider's handshake is
/// answered in the provider's own shape instead).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Received {
    /// `accepted` the first time, `duplicate` for a copy of an admitted event.
    status: &'static str,
    /// The inbound event's id (`null` for a duplicate whose original is gone).
    event_id: Option<hookgate_shared::ids::InboundEventId>,
    /// The deduplication key the event was admitted under.
    key: String,
}

/// What `/in/…` answers with a body.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
enum Answer {
    /// An admission.
    Admitted(Received),
    /// A provider's set-up request (Slack's `url_verification`, Zoom's
    /// `endpoint.url_validation`, Discord's ping, …), answered in the provider's shape.
    Handshake(verify::HandshakeBody),
}

/// A source's door: `/in/{source_id}`. An ingest source has no such door (its
/// URL carries a token): 404, as for a source that does not exist.
#[utoipa::path(
    tag = "Receiving",
    operation_id = "hookgate.in.receive",
    security(()),
    request_body(content = String, description = "The provider's request, exactly as it signed it.", content_type = "application/octet-stream"),
    responses(
        (status = 200, body = Answer, description = "Admitted, or a provider's handshake answered in its own shape",
            headers(("Hookgate-Duplicate" = bool, description = "On an admission: `true` when the event was admitted before and this copy was dropped."))),
        (status = 204, description = "A provider's handshake with no body"),
    )
)]
#[post("/in/{source_id}")]
pub async fn receive(
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    door: Door,
) -> Result<HttpResponse, ApiError> {
    receive_at(req, &path, None, payload, door).await
}

/// An ingest source's door: `/in/{source_id}/{token}` (its `ingestUrl`). A wrong
/// token, or a token on a source that is not an ingest source, answers 404.
#[utoipa::path(
    tag = "Receiving",
    operation_id = "hookgate.in.receive-ingest",
    security(()),
    request_body(content = String, description = "The provider's request, exactly as it signed it.", content_type = "application/octet-stream"),
    responses(
        (status = 200, body = Answer, description = "Admitted, or a provider's handshake answered in its own shape",
            headers(("Hookgate-Duplicate" = bool, description = "On an admission: `true` when the event was admitted before and this copy was dropped."))),
        (status = 204, description = "A provider's handshake with no body"),
    )
)]
#[post("/in/{source_id}/{token}")]
pub async fn receive_ingest(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
    door: Door,
) -> Result<HttpResponse, ApiError> {
    let (source, token) = path.into_inner();
    receive_at(req, &source, Some(&token), payload, door).await
}

async fn receive_at(
    req: HttpRequest,
    path: &str,
    token: Option<&str>,
    payload: web::Payload,
    door: Door,
) -> Result<HttpResponse, ApiError> {
    let Door { state, metrics, forwarder, group, alerts, certs } = door;
    let started = Instant::now();
    let source = crate::door::source_at(&state, path, token).await;
    let source = match source {
        Ok(Some(s)) => s,
        Ok(None) => return Err(ApiError::NotFound("source")),
        Err(e) => {
            // The source is unknown while Postgres is: no tenant or source label.
            let refusal = Refusal::from(e);
            metrics.request("", refusal.outcome());
            return Err(refusal.into_api());
        }
    };
    let services = Services { state: &state, forwarder: &forwarder, group: &group, certs: &certs };
    // The body's start is kept to log a refusal with (Svix's ingest log); the body
    // itself goes on to be admitted, not copied.
    let (result, head) = match read_body(payload, state.config.max_body).await {
        Ok(body) => {
            let head = match crate::refusals::logs(&source) {
                true => body[..body.len().min(crate::refusals::KEPT_BODY)].to_vec(),
                false => Vec::new(),
            };
            (handle(&req, body, services, &source).await, head)
        }
        Err(refusal) => (Err(refusal), Vec::new()),
    };
    match &result {
        Ok(Outcome::Admitted(Admitted::Duplicate(_, Layer::Redis), _)) => {
            state.limits.tally(&source.tenant_id, Counter::InboundDuplicates);
        }
        Err(refusal) => {
            if let Some(counter) = refusal.usage() {
                state.limits.tally(&source.tenant_id, counter);
            }
            match refusal {
                Refusal::Signature(_) => alerts.signature_failed(&state, &source).await,
                Refusal::Quota(e) => alerts.quota_exceeded(&state, &source, e).await,
                _ => {}
            }
        }
        Ok(_) => {}
    }
    metrics.duration.observe(started.elapsed().as_secs_f64());
    let tenant = source.tenant_id.as_str();
    match result {
        Ok(Outcome::Handshake(h)) => {
            metrics.request(tenant, "handshake");
            let mut res = HttpResponse::build(StatusCode::from_u16(h.status).unwrap_or(StatusCode::OK));
            Ok(match h.body {
                Some(body) => res.json(Answer::Handshake(body)),
                None => res.finish(),
            })
        }
        Ok(Outcome::Admitted(admitted, key)) => {
            let (status, outcome, body_status, id, duplicate) = match admitted {
                Admitted::Accepted(id) => (StatusCode::OK, "accepted", "accepted", Some(id), false),
                Admitted::Duplicate(id, layer) => {
                    metrics.duplicates.with_label_values(&[layer.label()]).inc();
                    (StatusCode::OK, "duplicate", "duplicate", id, true)
                }
                Admitted::InFlight => {
                    metrics.request(tenant, "conflict");
                    return Err(ApiError::Coded {
                        status: StatusCode::CONFLICT,
                        code: "in_flight",
                        detail: "this event is being processed by another request; retry later".into(),
                    });
                }
                // Counted as the 404 of an unknown source is: by the HTTP metrics only.
                Admitted::SourceGone => return Err(ApiError::NotFound("source")),
                Admitted::ForwardFailed => {
                    metrics.request(tenant, "forward_failed");
                    return Err(ApiError::Coded {
                        status: StatusCode::BAD_GATEWAY,
                        code: "forward_failed",
                        detail: "an endpoint did not accept the event; retry to process it again".into(),
                    });
                }
            };
            metrics.request(tenant, outcome);
            let mut res = HttpResponse::build(status);
            res.insert_header(("Hookgate-Duplicate", if duplicate { "true" } else { "false" }));
            // Adobe Sign takes a notification as delivered only with its client id echoed.
            if let Some(echo) = crate::door::echoed(&req, &source) {
                res.insert_header(echo);
            }
            Ok(res.json(Answer::Admitted(Received { status: body_status, event_id: id, key })))
        }
        Err(refusal) => {
            metrics.request(tenant, refusal.outcome());
            let refused = refusal.into_api();
            let status = actix_web::ResponseError::status_code(&refused).as_u16();
            alerts.log.record(&state, &source, status, &refused.to_string(), req.headers(), &head);
            Err(refused)
        }
    }
}

/// The shared services a request uses.
struct Services<'a> {
    state: &'a AppState,
    forwarder: &'a Forwarder,
    group: &'a GroupCommit,
    certs: &'a verify::Certificates,
}

/// What a verified request came to.
enum Outcome {
    Admitted(Admitted, String),
    /// A provider's set-up request, answered without admitting anything.
    Handshake(verify::Handshake),
}

/// The URL the provider posted to, as it signs it: the source's `publicUrl` (which
/// has no query), else the URL Hookgate shows for the source, with the query the
/// request came with (the provider's own, such as Twilio's `bodySHA256`).
fn signed_url(req: &HttpRequest, state: &AppState, source: &sources::Source) -> String {
    let base = match (&source.public_url, &source.ingest) {
        (Some(url), _) => url.clone(),
        // An ingest source's URL is its `ingestUrl`, token and all: the path requested.
        (None, Some(_)) => format!("{}{}", hookgate_shared::http::public_base(req, &state.config), req.path()),
        (None, None) => hookgate_shared::http::source_url(req, &state.config, &source.id),
    };
    match req.query_string() {
        "" => base,
        q => format!("{base}?{q}"),
    }
}

async fn handle(
    req: &HttpRequest,
    body: Vec<u8>,
    services: Services<'_>,
    source: &sources::Source,
) -> Result<Outcome, Refusal> {
    let Services { state, forwarder, group, certs } = services;
    let secrets = secrets::valid_secrets(state, source).map_err(Refusal::Internal)?;
    let url = match source.provider.signs_url() || source.provider.reads_query() {
        true => signed_url(req, state, source),
        false => String::new(),
    };
    let request = verify::Request {
        provider: &source.provider,
        headers: req.headers(),
        body: &body,
        method: req.method().as_str(),
        url: &url,
        now: chrono::Utc::now().timestamp(),
    };
    let preset = verify::preset(&source.provider);
    if preset.unsigned_ping.is_some_and(|ping| ping(&request)) {
        return Ok(Outcome::Handshake(verify::Handshake {
            status: 200,
            body: Some(verify::HandshakeBody::Ping { status: "ping" }),
        }));
    }
    verify::verify(&request, &secrets, certs)
        .instrument(hookgate_shared::otel_span!("ingress.verify", provider = %source.provider.name()))
        .await
        .map_err(|e| match e {
            e @ verify::VerifyError::CertificateUnavailable(_) => Refusal::CertificateUnavailable(e),
            e => Refusal::Signature(e),
        })?;
    if let Some(answer) = preset.handshake.and_then(|h| h(&request, &secrets)) {
        return Ok(Outcome::Handshake(answer));
    }
    let extracted = extract::key_value(&source.idempotency, &request).map_err(|e| Refusal::KeyMissing(e.0))?;
    let plain = match extracted {
        Some((kind, value)) => key::derive(&source.tenant_id, &source.id, kind, &value),
        // Idempotency disabled: every request is its own event.
        None => key::derive(&source.tenant_id, &source.id, KeyKind::Body, ulid::Ulid::new().to_string().as_bytes()),
    };
    // Stored keyed per tenant (Redis knows only that form).
    let key = state.inbound_keys.keyed(&source.tenant_id, &plain);
    let retention_days = source.retention(state.config.retention_inbound_days);
    if !matches!(source.idempotency, KeySpec::Disabled(_)) {
        let seen =
            admit::seen(&state.redis, &source.tenant_id, &key).instrument(hookgate_shared::otel_span!("ingress.seen"));
        if let Some(id) = seen.await {
            admit::count_duplicate(&state.redis, &source.tenant_id, &key, retention_days).await;
            return Ok(Outcome::Admitted(Admitted::Duplicate(Some(id), Layer::Redis), key));
        }
    }
    // The plain form is looked for in Postgres while keys stored before the switch
    // to keyed keys may remain (when that was is read once per process).
    let plain_key = inbound_keys::plain_form(state, plain).await?;
    // Over the tenant's inbound rate: 429, and the provider retries later. Only
    // authentic, new events count against it (a forger cannot spend a tenant's
    // quota, a duplicate Redis knows costs nothing).
    let quotas = limits::quotas(state, &source.tenant_id).await?;
    limits::rate(state, &source.tenant_id, &quotas, Limit::InboundPerSecond).await.map_err(Refusal::Quota)?;
    let content_type = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let event_type = extract::event_type(source.event_type_path.as_deref(), &request);
    let candidate =
        Candidate { source, retention_days, key: key.clone(), plain_key, event_type, content_type, payload: body };
    let span = hookgate_shared::otel_span!("ingress.admit", mode = source.mode.as_str());
    let admitted = async {
        if source.mode == Mode::Sync {
            Ok(admit::admit_sync(state, forwarder, candidate).await?)
        } else {
            group.admit(candidate).await.map_err(|e| {
                if e.unavailable {
                    Refusal::Unavailable
                } else {
                    Refusal::Internal(e.detail)
                }
            })
        }
    }
    .instrument(span)
    .await?;
    Ok(Outcome::Admitted(admitted, key))
}
