//! A destination as the API shows it (Svix's `DestinationOut`): its
//! configuration opened and redacted, its status, and why it fails if it does.

use chrono::{DateTime, Utc};
use hookgate_egress::destinations::config::Config;
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, TenantId},
    status::DeliveryStatus,
    store::{
        attempts::{self, AttemptFilter, Scope},
        endpoints::Endpoint,
        page::PageRequest,
    },
    AppState,
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// Svix's `DestinationOut`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DestinationOut {
    id: String,
    uid: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    config: Value,
    /// `enabled`, `disabled`, or `retrying` while its attempts fail.
    status: &'static str,
    /// Queue destinations are pushed to one message at a time: no iterator is kept.
    current_iterator: String,
    failure_reason: Option<String>,
    next_retry_at: Option<DateTime<Utc>>,
    batch_size: i32,
    max_wait_secs: i32,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// Its content filter, as given; absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
}

pub(super) fn open(state: &AppState, tenant: &TenantId, app: &AppId, ep: &Endpoint) -> Result<Config, ApiError> {
    let sealed = ep.destination.as_deref().ok_or(ApiError::NotFound("destination"))?;
    Config::open(state, tenant, app, &ep.id, sealed)
        .map_err(|e| ApiError::Internal(format!("a destination's configuration cannot be opened: {e}")))
}

/// The destination as the API shows it; `reason`: why it fails, if it does;
/// `names_only`: header values hidden (see `endpoint::headers::values_hidden`;
/// only reads pass `true`: a portal link may not write a destination).
pub(super) fn shown(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: Endpoint,
    reason: Option<String>,
    names_only: bool,
) -> Result<DestinationOut, ApiError> {
    let config = open(state, tenant, app, &ep)?;
    let status = match (ep.disabled, ep.failing_since) {
        (true, _) => "disabled",
        (false, Some(_)) => "retrying",
        (false, None) => "enabled",
    };
    Ok(DestinationOut {
        id: ep.id.to_string(),
        uid: ep.uid,
        kind: ep.kind.type_name().unwrap_or("http"),
        config: config.shown(names_only),
        status,
        current_iterator: String::new(),
        failure_reason: reason,
        next_retry_at: None,
        batch_size: ep.batch_size.unwrap_or(1),
        max_wait_secs: ep.max_wait_secs.unwrap_or(0),
        event_types: ep.event_types,
        channels: ep.channels,
        metadata: ep.metadata,
        created_at: ep.created_at,
        updated_at: ep.updated_at,
        filter: ep.filter,
    })
}

/// The answer of its last failed attempt, for a destination that fails or was disabled.
pub(super) async fn failure_reason(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: &Endpoint,
) -> Result<Option<String>, ApiError> {
    if ep.failing_since.is_none() {
        return Ok(None);
    }
    let conn = db::conn(&state.db).await?;
    let filter = AttemptFilter { status: Some(DeliveryStatus::Failed), ..AttemptFilter::default() };
    let page = attempts::list(&**conn, tenant, app, Scope::Endpoint(&ep.id), &PageRequest::new(Some(1), None), &filter)
        .await?;
    Ok(page.data.into_iter().next().map(|a| a.response))
}
