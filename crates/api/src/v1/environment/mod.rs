//! `v1.environment`: the tenant's whole configuration as one document, and back.
//!
//! Svix's document has event types, settings and connectors; Hookgate's adds
//! `applications`, each with its HTTP `endpoints` (filters, throttle, metadata,
//! custom headers and signing secret), so a tenant can be copied, kept in git or
//! moved between installations. Secrets and header values are never written in
//! clear: with the operator's `HOOKGATE_TRANSIT_KEY` set they are sealed with it,
//! each bound to its endpoint's ids and URL, and only an installation with the
//! same key opens them on import; without it they are left out and `notCarried`
//! says so. Tenants never hold the key: header values stay write-only to them.

pub mod import;

use std::collections::HashMap;

use actix_web::{post, web, HttpResponse};
use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::{DateTime, Utc};
use hookgate_egress::secrets;
use hookgate_shared::{
    crypto::TransitKey,
    db,
    http::ApiError,
    ids::{AppId, TenantId},
    store::{applications, endpoints, event_types, portals},
    AppState,
};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::KeyAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(export);
    import::configure(cfg);
}

/// The setting that holds the transit key, as errors name it.
pub(crate) const TRANSIT_SETTING: &str = "HOOKGATE_TRANSIT_KEY";
/// Applications, endpoints and event types one document may hold: it is
/// written and read in one request.
pub(crate) const MOST_APPS: usize = 1000;
pub(crate) const MOST_ENDPOINTS: usize = 20_000;
pub(crate) const MOST_EVENT_TYPES: usize = 10_000;

/// The document. Every list may be absent on import (nothing of that kind is touched).
#[derive(Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    #[serde(default)]
    pub version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// The tenant exported (its sealed values are bound to it): through the API
    /// only that tenant imports them; the operator's `hookgate import
    /// environment` moves them to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<EventTypeDoc>>,
    /// `{"portal": {…}}`: the customer portal's branding; other keys (Svix's
    /// organisation settings) are not Hookgate's and are reported, not kept.
    #[serde(default)]
    pub settings: Option<serde_json::Map<String, Value>>,
    /// Svix's transformation templates: Hookgate has none, so exported empty
    /// and reported on import.
    #[serde(default)]
    pub connectors: Option<Vec<Value>>,
    #[serde(default)]
    pub applications: Option<Vec<AppDoc>>,
    /// What the export left out, or the import did not take, and why.
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub not_carried: Vec<String>,
}

/// An event type of the document.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvironmentEventType)]
pub struct EventTypeDoc {
    pub name: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub description: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub archived: bool,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub deprecated: bool,
    #[serde(default)]
    pub schemas: Option<Value>,
    /// Hookgate's event types carry one flag; Svix's `featureFlags` of one is taken too.
    #[serde(default)]
    pub feature_flag: Option<String>,
    /// Svix's, read on import; never written (the export writes `featureFlag`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(write_only)]
    pub feature_flags: Option<Vec<String>>,
    /// Written by the export; ignored on import.
    #[serde(default, deserialize_with = "ignored")]
    #[schema(read_only)]
    pub created_at: Option<DateTime<Utc>>,
    /// Written by the export; ignored on import.
    #[serde(default, deserialize_with = "ignored")]
    #[schema(read_only)]
    pub updated_at: Option<DateTime<Utc>>,
}

/// Reads any value as `None`: a field the export writes and the import ignores.
fn ignored<'de, D: Deserializer<'de>, T>(d: D) -> Result<Option<T>, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| None)
}

/// An application of the document, with its HTTP endpoints.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvironmentApplication)]
pub struct AppDoc {
    /// Kept across the move: a second import of the same document updates.
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    pub name: String,
    #[serde(default, alias = "rateLimit")]
    pub throttle_rate: Option<i64>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub metadata: HashMap<String, String>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub endpoints: Vec<EndpointDoc>,
}

/// An HTTP endpoint of the document.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvironmentEndpoint)]
pub struct EndpointDoc {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    pub url: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub description: String,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub disabled: bool,
    #[serde(default, alias = "filterTypes")]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    pub channels: Option<Vec<String>>,
    #[serde(default, alias = "rateLimit")]
    pub throttle_rate: Option<i64>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    pub metadata: HashMap<String, String>,
    /// The signing secret (`whsec_…`, or an Ed25519 `whsk_…` key), sealed with the transit key.
    #[serde(default)]
    pub secret: Option<Sealed>,
    /// The custom headers (a JSON object), sealed with the transit key.
    #[serde(default)]
    pub headers: Option<Sealed>,
    /// Hookgate's content filter, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// A value sealed with the transit key, bound to its endpoint's place.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = EnvironmentSealed)]
pub struct Sealed {
    /// Base64.
    pub sealed: String,
}

/// What binds a sealed value to its tenant, application, endpoint, URL and
/// field: a secret moved to another entry, an entry's URL changed, or the
/// document imported by another tenant, no longer opens. (Ids are unique only
/// within a tenant, and one transit key serves the installation: without the
/// tenant, any tenant holding another's document could open its secrets.)
pub fn purpose(tenant: &str, app: &str, ep: &str, url: &str, field: &str) -> String {
    format!("environment:{tenant}:{app}:{ep}:{field}:{url}")
}

/// The tenant's configuration as one document (`EnvironmentOut`, extended).
#[utoipa::path(tag = "Environment", operation_id = "v1.environment.export", responses((status = 200, body = Environment)))]
#[post("/environment/export")]
async fn export(key: KeyAuth, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let transit = state.config.transit_key.clone();
    let conn = db::conn(&state.db).await?;
    let mut types = Vec::new();
    let mut page = hookgate_shared::store::page::PageRequest::new(Some(250), None);
    loop {
        let got = event_types::list(&**conn, &key.0, &page, true, None).await?;
        let next = got.iterator.clone();
        types.extend(got.data);
        match next.filter(|_| !got.done && types.len() < MOST_EVENT_TYPES) {
            Some(after) => page = hookgate_shared::store::page::PageRequest::following(250, Some(after)),
            None => break,
        }
    }
    let apps = applications::all(&**conn, &key.0, MOST_APPS as i64 + 1).await?;
    let eps = endpoints::all_http(&**conn, &key.0, MOST_ENDPOINTS as i64 + 1).await?;
    if apps.len() > MOST_APPS || eps.len() > MOST_ENDPOINTS || types.len() > MOST_EVENT_TYPES {
        return Err(ApiError::Conflict(format!(
            "the tenant is larger than one document holds ({MOST_APPS} applications, {MOST_ENDPOINTS} endpoints, \
             {MOST_EVENT_TYPES} event types)"
        )));
    }
    let portal = portals::get(&**conn, &key.0).await?;
    let mut not_carried = vec![
        "destinations (queues, databases, FIFO and polling endpoints): their credentials are not exported".to_owned(),
        "transformations, messages and attempts: configuration only".to_owned(),
    ];
    if transit.is_none() {
        not_carried.push(format!(
            "endpoint secrets and custom headers: the operator has set no {TRANSIT_SETTING} to seal them with"
        ));
    }
    let mut by_app: HashMap<AppId, Vec<EndpointDoc>> = HashMap::new();
    for (app, ep) in eps {
        let doc = endpoint_doc(&state, &key.0, &app, ep, transit.as_ref())?;
        by_app.entry(app).or_default().push(doc);
    }
    let applications = apps
        .into_iter()
        .map(|a| AppDoc {
            endpoints: by_app.remove(&a.id).unwrap_or_default(),
            id: Some(a.id.to_string()),
            uid: a.uid,
            name: a.name,
            throttle_rate: a.throttle_rate.map(i64::from),
            metadata: serde_json::from_value(a.metadata).unwrap_or_default(),
        })
        .collect();
    let event_types = types
        .into_iter()
        .map(|t| EventTypeDoc {
            name: t.name,
            description: t.description,
            archived: t.archived,
            deprecated: t.deprecated,
            schemas: t.schemas,
            feature_flag: t.feature_flag,
            feature_flags: None,
            created_at: Some(t.created_at),
            updated_at: Some(t.updated_at),
        })
        .collect();
    let doc = Environment {
        version: Some(1),
        created_at: Some(Utc::now()),
        tenant: Some(key.0.to_string()),
        event_types: Some(event_types),
        settings: Some(json!({ "portal": portal }).as_object().cloned().unwrap_or_default()),
        connectors: Some(Vec::new()),
        applications: Some(applications),
        not_carried,
    };
    Ok(HttpResponse::Ok().json(doc))
}

/// One endpoint as the document has it, its secret and headers sealed for transit.
fn endpoint_doc(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    ep: endpoints::Endpoint,
    transit: Option<&TransitKey>,
) -> Result<EndpointDoc, ApiError> {
    let (secret, headers) = match transit {
        None => (None, None),
        Some(k) => {
            let fail = |e: String| ApiError::Internal(format!("endpoint {}: {e}", ep.id));
            let secret = secrets::open(state, tenant, app, &ep.id, &ep.secret).map_err(fail)?;
            let headers = secrets::open_headers(state, tenant, app, &ep.id, &ep.headers).map_err(fail)?;
            let seal = |field: &str, bytes: &[u8]| Sealed {
                sealed: STANDARD
                    .encode(k.seal(&purpose(tenant.as_str(), app.as_str(), ep.id.as_str(), &ep.url, field), bytes)),
            };
            let headers = headers
                .as_object()
                .filter(|h| !h.is_empty())
                .map(|h| seal("headers", Value::Object(h.clone()).to_string().as_bytes()));
            (Some(seal("secret", secret.as_bytes())), headers)
        }
    };
    Ok(EndpointDoc {
        id: Some(ep.id.to_string()),
        uid: ep.uid,
        url: ep.url,
        description: ep.description,
        disabled: ep.disabled,
        event_types: ep.event_types,
        channels: ep.channels,
        throttle_rate: ep.throttle_rate.map(i64::from),
        metadata: serde_json::from_value(ep.metadata).unwrap_or_default(),
        secret,
        headers,
        filter: ep.filter,
    })
}
