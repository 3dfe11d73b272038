//! `…/transformation/try`: the portal editor's run of code on a payload, as a
//! delivery to the endpoint would run it, with nothing saved or sent.
//!
//! It runs tenant code on demand, so it is held in three ways: each tenant has
//! a share of the API's sandboxes (its tries wait behind its own), a rate
//! ([`TRIES_PER_MINUTE`] a tenant, in each process, saves' checks counted too,
//! its portal links' apart from its own keys'), and an endpoint whose runs are
//! killed at the wall-clock limit again and again rests, whatever code is
//! tried on it next. A caller that sees the endpoint's
//! variables as `[redacted]` runs the code with them so: a try cannot read
//! what a GET hides.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::{post, web, HttpMessage, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use hookgate_egress::{
    sandbox::{Sandbox, Scope},
    secrets, transform,
};
use hookgate_shared::ids::{AppId, EndpointId, Ref, TenantId};
use hookgate_shared::store::{tenants, transformations};
use hookgate_shared::{db, http::ApiError, AppState};

use super::endpoint::crud::find;
use crate::{Principal, TenantAuth};

/// Longest code a transformation may have (saved or tried).
pub(crate) const MOST_CODE: usize = 64 * 1024;

/// An endpoint's path: its application and itself, by id or uid.
pub(crate) type EpPath = web::Path<(Ref<AppId>, Ref<EndpointId>)>;

/// Why a tenant's transformations neither run nor save.
pub(crate) const OFF: &str = "transformations are off for this tenant: the operator allows them (`transformations` on the \
                   tenant), and the tenant's own switch (`PUT /api/v1/settings/transformations`) is on unless turned off";

/// Tries a tenant may run in a minute, in one process.
const TRIES_PER_MINUTE: u32 = 60;
/// Tenants whose tries are counted; past it the oldest minutes are dropped.
const MOST_COUNTED: usize = 10_000;

/// Code to try on a payload, as a delivery of `eventType` would run it.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = TransformationTryIn)]
struct TryIn {
    code: String,
    event_type: String,
    payload: Value,
}

/// What `…/transformation/try` says a delivery would do.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = TransformationTryOut)]
enum TryOut {
    /// The request that would be sent (`cancel` is false).
    Send {
        cancel: bool,
        method: &'static str,
        /// JSON, or the text the code made when it is not JSON.
        payload: Value,
        url: String,
    },
    /// The code cancelled the delivery (`cancel` is true).
    Cancel { cancel: bool },
    /// The code failed.
    Error { error: String },
}

/// Runs `code` on a payload (an event type's example, a past message's) as a
/// delivery to this endpoint would, with its URL and variables, and says what
/// would be sent: `{cancel, method, url, payload}`, or `{error}` when the code
/// fails. Nothing is saved or sent. Variables the caller may not read are run
/// as `[redacted]`; 429 past the tenant's rate of tries.
#[utoipa::path(tag = "Transformation", operation_id = "hookgate.transformation.try", responses((status = 200, body = TryOut)))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/transformation/try")]
pub(crate) async fn try_one(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<TryIn>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let payload = serde_json::to_vec(&body.payload).map_err(|e| ApiError::Internal(e.to_string()))?;
    let ran = run(
        &state,
        &tenant,
        &req,
        &path,
        Run { code: body.code, event_type: body.event_type, payload, variables: None },
    )
    .await?;
    Ok(HttpResponse::Ok().json(match ran {
        Ok(transform::Outcome::Cancel) => TryOut::Cancel { cancel: true },
        Ok(transform::Outcome::Send(h)) => {
            let payload = serde_json::from_slice::<Value>(&h.payload)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&h.payload).into_owned()));
            TryOut::Send { cancel: false, method: h.method.as_str(), payload, url: h.url }
        }
        Err(e) => TryOut::Error { error: e.to_string() },
    }))
}

/// Svix's `TransformationSimulateIn`: code to run on a payload of `eventType`,
/// with these variables (absent: the endpoint's, as the caller may see them).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = TransformationSimulateIn)]
pub(crate) struct SimulateIn {
    code: String,
    event_type: String,
    /// Read, not used: a transformation sees no channels.
    #[serde(default)]
    #[allow(dead_code)]
    channels: Option<Vec<String>>,
    #[schema(value_type = Object)]
    payload: Value,
    #[serde(default)]
    variables: Option<HashMap<String, String>>,
}

/// Svix's `TransformationSimulateOut`: the request a delivery would send, its
/// payload as text; `cancel` with an empty `url` and `payload` when the code
/// cancels the delivery.
#[derive(Serialize, ToSchema)]
#[schema(as = TransformationSimulateOut)]
pub(crate) struct SimulateOut {
    cancel: bool,
    #[schema(value_type = Option<String>)]
    method: Option<&'static str>,
    payload: String,
    url: String,
}

/// Runs `code` on `payload` as a delivery to this endpoint would, and answers
/// the request it would send; nothing is saved or sent. Code that fails answers
/// 422 with its error. The same sandboxes and rate as `…/transformation/try`.
#[utoipa::path(tag = "Transformation", operation_id = "v1.endpoint.transformation.simulate", responses((status = 200, body = SimulateOut)))]
#[post("/app/{app_id}/endpoint/{endpoint_id}/transformation/simulate")]
pub(crate) async fn simulate(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: EpPath,
    body: web::Json<SimulateIn>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if !body.payload.is_object() {
        return Err(ApiError::Validation("`payload` must be a JSON object".into()));
    }
    super::validate::uid("eventType", &body.event_type)?;
    let payload = serde_json::to_vec(&body.payload).map_err(|e| ApiError::Internal(e.to_string()))?;
    let r = Run { code: body.code, event_type: body.event_type, payload, variables: body.variables };
    let out = match run(&state, &tenant, &req, &path, r).await? {
        Ok(transform::Outcome::Cancel) => {
            SimulateOut { cancel: true, method: None, payload: String::new(), url: String::new() }
        }
        Ok(transform::Outcome::Send(h)) => SimulateOut {
            cancel: false,
            method: Some(h.method.as_str()),
            payload: String::from_utf8_lossy(&h.payload).into_owned(),
            url: h.url,
        },
        Err(e) => return Err(ApiError::Validation(format!("the transformation failed: {e}"))),
    };
    Ok(HttpResponse::Ok().json(out))
}

/// Code to run, on what, with which variables (`None`: the endpoint's, as the caller may see them).
pub(crate) struct Run {
    pub code: String,
    pub event_type: String,
    pub payload: Vec<u8>,
    pub variables: Option<HashMap<String, String>>,
}

/// Runs code as a delivery to the endpoint the path names would, in the API's
/// sandboxes, counted against the tenant's tries; the code's own failure is
/// the inner error.
pub(crate) async fn run(
    state: &AppState,
    tenant: &TenantAuth,
    req: &HttpRequest,
    path: &EpPath,
    r: Run,
) -> Result<Result<transform::Outcome, transform::TransformError>, ApiError> {
    if r.code.len() > MOST_CODE {
        return Err(ApiError::Validation(format!("`code`: at most {MOST_CODE} bytes")));
    }
    let (app, ep) = find(state, tenant, &path.0, &path.1).await?;
    let caller = Caller::of(req, state, &tenant.0).await?;
    let conn = db::conn(&state.db).await?;
    if !tenants::get(&**conn, &tenant.0).await?.is_some_and(|t| t.transforms()) {
        return Err(ApiError::Forbidden(OFF.into()));
    }
    let stored = transformations::get(&**conn, &tenant.0, &app, &ep.id).await?;
    drop(conn);
    counted(&tenant.0, &caller)?;
    let variables = match r.variables {
        Some(given) => json!(given),
        None => {
            let mut stored =
                secrets::open_variables(state, &tenant.0, &app, &ep.id, stored.and_then(|t| t.variables).as_deref())
                    .map_err(|e| ApiError::Internal(format!("endpoint {}: {e}", ep.id)))?;
            if let (true, Some(vars)) = (caller.hidden, stored.as_object_mut()) {
                vars.values_mut().for_each(|v| *v = json!("[redacted]"));
            }
            stored
        }
    };
    let hook = transform::Webhook {
        event_type: r.event_type,
        method: transform::Method::Post,
        url: ep.url.clone(),
        payload: r.payload,
        json: true,
    };
    let scope = Scope { tenant: &tenant.0, app: &app, endpoint: &ep.id, redacted: caller.hidden };
    Ok(Sandbox::for_api().run(&scope, r.code.into(), variables.into(), hook, state.config.max_body).await)
}

/// Who runs code through the API: what it may see, and whose tries it counts in.
pub(crate) struct Caller {
    /// It sees the endpoint's variables as `[redacted]`.
    pub hidden: bool,
    /// A portal link or an integration key: its tries count apart from the
    /// tenant's own, so a customer cannot spend the tenant's.
    pub portal: bool,
}

impl Caller {
    pub(crate) async fn of(req: &HttpRequest, state: &AppState, tenant: &TenantId) -> Result<Caller, ApiError> {
        let portal = matches!(req.extensions().get::<Principal>(), Some(Principal::Portal { .. }));
        let hidden = super::endpoint::headers::values_hidden(req, state, tenant).await?;
        Ok(Caller { hidden, portal })
    }
}

/// Each (tenant, portal) bucket's minute: when it began, and the tries in it.
type Minutes = HashMap<(TenantId, bool), (Instant, u32)>;

/// Counts a try (or a save's check) against the minute of the tenant's callers
/// of this kind (its own keys, or its portal links and integrations); 429 once
/// the minute is full.
pub(crate) fn counted(tenant: &TenantId, caller: &Caller) -> Result<(), ApiError> {
    static TRIES: Mutex<Option<Minutes>> = Mutex::new(None);
    let now = Instant::now();
    let minute = Duration::from_secs(60);
    let mut tries = TRIES.lock().expect("tries");
    let tries = tries.get_or_insert_with(HashMap::new);
    if tries.len() >= MOST_COUNTED {
        tries.retain(|_, (since, _)| now.duration_since(*since) < minute);
    }
    let (since, n) = tries.entry((tenant.clone(), caller.portal)).or_insert((now, 0));
    if now.duration_since(*since) >= minute {
        (*since, *n) = (now, 0);
    }
    if *n >= TRIES_PER_MINUTE {
        let left = minute.saturating_sub(now.duration_since(*since));
        return Err(ApiError::RateLimited {
            detail: format!("at most {TRIES_PER_MINUTE} transformation tries a minute; try again shortly"),
            retry_after_secs: left.as_secs().max(1),
        });
    }
    *n += 1;
    Ok(())
}
