//! `POST /environment/import`: a document from `environment/export` (this
//! installation's or another's, or one written by hand) into the tenant. It adds
//! and updates, never deletes; all of it commits or none.
//!
//! An application or endpoint is matched by its `id` in this tenant, then by its
//! `uid`; unmatched, it is created, keeping the document's id when it is one,
//! so importing the same document twice updates instead of duplicating.

use std::collections::HashMap;

use actix_web::{post, web, HttpResponse};
use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::Utc;
use hookgate_egress::{secrets, signing::EndpointSecret};
use hookgate_shared::{
    crypto::TransitKey,
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    store::{applications, endpoints, environment_imports, event_types, portals, StoreError},
    AppState,
};
use serde::Serialize;
use tokio_postgres::GenericClient;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::quota;
use crate::v1::environment::{
    purpose, AppDoc, EndpointDoc, Environment, Sealed, MOST_APPS, MOST_ENDPOINTS, MOST_EVENT_TYPES, TRANSIT_SETTING,
};
use crate::v1::{applications::AppIn, endpoint::crud::EndpointIn, validate};
use crate::KeyAuth;

/// What an import did, by kind: `[created, updated]`.
#[derive(Default)]
struct Tally {
    event_types: usize,
    apps: [usize; 2],
    endpoints: [usize; 2],
    not_carried: Vec<String>,
}

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(import);
}

/// What an import did: event types written, applications and endpoints created
/// and updated, and what the document had that was not taken.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvironmentImportOut)]
pub struct ImportReport {
    event_types: usize,
    applications: Counted,
    endpoints: Counted,
    not_carried: Vec<String>,
}

/// How many of one kind an import created and updated.
#[derive(Serialize, ToSchema)]
#[schema(as = EnvironmentImportCount)]
struct Counted {
    created: usize,
    updated: usize,
}

/// Adds and updates what the document names, never deletes; all of it or none.
#[utoipa::path(tag = "Environment", operation_id = "v1.environment.import", responses((status = 200, body = ImportReport)))]
#[post("/environment/import")]
async fn import(
    key: KeyAuth,
    state: web::Data<AppState>,
    body: web::Json<Environment>,
) -> Result<HttpResponse, ApiError> {
    // Through the API a tenant opens only what it exported itself.
    let sealed_for = key.0.to_string();
    let report =
        import_report(&state, &key.0, body.into_inner(), state.config.transit_key.as_ref(), &sealed_for).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// [`import_report`] as JSON: what `hookgate import svix` and `hookgate import
/// environment` run, print and add to.
pub async fn import_document(
    state: &AppState,
    tenant: &TenantId,
    doc: Environment,
    transit: Option<&TransitKey>,
    sealed_for: &str,
) -> Result<serde_json::Value, ApiError> {
    let report = import_report(state, tenant, doc, transit, sealed_for).await?;
    Ok(serde_json::to_value(report).expect("a report serialises"))
}

/// Imports `doc` into the tenant, its sealed values opened with `transit` as
/// sealed for `sealed_for` (the tenant that exported them); the report the
/// route answers.
pub async fn import_report(
    state: &AppState,
    tenant: &TenantId,
    doc: Environment,
    transit: Option<&TransitKey>,
    sealed_for: &str,
) -> Result<ImportReport, ApiError> {
    let key = KeyAuth(tenant.clone());
    let apps = doc.applications.as_deref().unwrap_or_default();
    let n_endpoints: usize = apps.iter().map(|a| a.endpoints.len()).sum();
    if apps.len() > MOST_APPS
        || n_endpoints > MOST_ENDPOINTS
        || doc.event_types.as_ref().is_some_and(|t| t.len() > MOST_EVENT_TYPES)
    {
        return Err(ApiError::Validation(format!(
            "a document holds at most {MOST_APPS} applications, {MOST_ENDPOINTS} endpoints, {MOST_EVENT_TYPES} event types"
        )));
    }
    let mut tally = Tally::default();
    let portal = settings(&doc, &mut tally)?;
    let allow = crate::v1::endpoint::crud::allowed(state, &key.0).await?;
    let app_cap = quota::app_cap(state, &key.0).await?;
    let ep_cap =
        hookgate_shared::limits::quotas(state, &key.0).await?.limit(hookgate_shared::quota::Limit::EndpointsPerApp);
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    for t in doc.event_types.iter().flatten() {
        validate::uid("eventTypes[].name", &t.name)?;
        if t.name.starts_with('-') {
            return Err(ApiError::Validation("`eventTypes[].name` must not start with `-`".into()));
        }
        let flag = match (&t.feature_flag, t.feature_flags.as_deref()) {
            (Some(f), _) => Some(f.clone()),
            (None, None | Some([])) => None,
            (None, Some([one])) => Some(one.clone()),
            (None, Some(_)) => {
                return Err(ApiError::Validation(format!(
                    "event type `{}`: Hookgate's event types carry one feature flag",
                    t.name
                )))
            }
        };
        if let Some(f) = &flag {
            validate::uid("featureFlag", f)?;
        }
        let now = Utc::now();
        let row = event_types::EventType {
            name: t.name.clone(),
            description: t.description.clone(),
            archived: t.archived,
            deprecated: t.deprecated,
            schemas: t.schemas.clone(),
            feature_flag: flag,
            created_at: now,
            updated_at: now,
        };
        event_types::upsert(&*tx, &key.0, &row).await?;
        tally.event_types += 1;
    }
    if let Some(p) = &portal {
        portals::put(&*tx, &key.0, p).await?;
    }
    // One import of a tenant at a time: each holds a connection for its whole transaction.
    if !environment_imports::begin(&*tx, &key.0).await? {
        return Err(ApiError::Conflict("an import into this tenant is running; try again when it ends".into()));
    }
    let ctx = Ctx { state, tenant: &key.0, transit, sealed_for, allow: &allow, ep_cap };
    for a in apps {
        let app = upsert_app(&*tx, &key.0, a, app_cap, &mut tally).await?;
        for e in &a.endpoints {
            upsert_endpoint(&ctx, &*tx, &app, a.id.as_deref(), e, &mut tally).await?;
        }
    }
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(
        tenant = %key.0, event_types = tally.event_types, apps = ?tally.apps, endpoints = ?tally.endpoints,
        "environment imported"
    );
    Ok(ImportReport {
        event_types: tally.event_types,
        applications: Counted { created: tally.apps[0], updated: tally.apps[1] },
        endpoints: Counted { created: tally.endpoints[0], updated: tally.endpoints[1] },
        not_carried: tally.not_carried,
    })
}

/// The portal settings to set, if the document has them; other settings and
/// connectors are reported.
fn settings(doc: &Environment, tally: &mut Tally) -> Result<Option<portals::PortalSettings>, ApiError> {
    if doc.connectors.as_ref().is_some_and(|c| !c.is_empty()) {
        tally.not_carried.push("connectors: Hookgate has no transformation templates".into());
    }
    let Some(settings) = &doc.settings else { return Ok(None) };
    let mut portal = None;
    for (k, v) in settings {
        match k.as_str() {
            "portal" => {
                let parsed: crate::v1::portal_settings::SettingsIn = serde_json::from_value(v.clone())
                    .map_err(|e| ApiError::Validation(format!("`settings.portal`: {e}")))?;
                portal = Some(parsed.parse()?);
            }
            other => tally.not_carried.push(format!("settings.{other}: not a setting Hookgate has")),
        }
    }
    Ok(portal)
}

/// The application the document's entry names (by id, then uid), updated; or made.
async fn upsert_app(
    tx: &impl GenericClient,
    tenant: &TenantId,
    a: &AppDoc,
    cap: Option<u64>,
    tally: &mut Tally,
) -> Result<AppId, ApiError> {
    let fields = AppIn::new(a.name.clone(), a.uid.clone(), a.throttle_rate, a.metadata.clone())
        .into_fields()
        .map_err(|e| in_app(a, e))?;
    let id = a.id.as_deref().and_then(|s| AppId::parse(s).ok());
    let mut found = None;
    if let Some(id) = &id {
        found = applications::get(tx, tenant, &Ref::Id(id.clone())).await?;
    }
    if let (None, Some(uid)) = (&found, &a.uid) {
        found = applications::get(tx, tenant, &Ref::Uid(uid.clone())).await?;
    }
    if let Some(app) = found {
        applications::replace(tx, tenant, &app.id, &fields)
            .await
            .map_err(|e| in_app(a, validate::conflict("an application with this uid")(e.into())))?;
        tally.apps[1] += 1;
        return Ok(app.id);
    }
    let id = match id {
        Some(id) if applications::id_free(tx, tenant, &id).await? => id,
        _ => AppId::generate(),
    };
    match applications::insert_capped(tx, tenant, &id, &fields, cap)
        .await
        .map_err(|e| in_app(a, validate::conflict("an application with this uid")(e.into())))?
    {
        Ok(app) => {
            tally.apps[0] += 1;
            Ok(app.id)
        }
        Err(n) => Err(ApiError::Validation(hookgate_shared::quota::apps_full(n, cap.unwrap_or_default()))),
    }
}

/// What an endpoint's import needs besides the endpoint.
struct Ctx<'a> {
    state: &'a AppState,
    tenant: &'a TenantId,
    transit: Option<&'a TransitKey>,
    sealed_for: &'a str,
    allow: &'a hookgate_egress::ssrf::Guard,
    ep_cap: Option<u64>,
}

/// The endpoint the document's entry names in `app`, updated; or made.
async fn upsert_endpoint(
    ctx: &Ctx<'_>,
    tx: &impl GenericClient,
    app: &AppId,
    doc_app: Option<&str>,
    e: &EndpointDoc,
    tally: &mut Tally,
) -> Result<(), ApiError> {
    let at = |err: ApiError| in_endpoint(e, err);
    let fields = EndpointIn {
        url: e.url.clone(),
        uid: e.uid.clone(),
        description: e.description.clone(),
        disabled: e.disabled,
        event_types: e.event_types.clone(),
        channels: e.channels.clone(),
        throttle_rate: e.throttle_rate,
        metadata: e.metadata.clone(),
        secret: None,
        headers: None,
        version: None,
        // Absent from a document exported before filters: an endpoint found keeps its own.
        filter: e.filter.clone().map_or(crate::Maybe::Absent, crate::Maybe::Value),
    }
    .fields(ctx.allow)
    .map_err(at)?;
    // Sealed under the document's own ids: opened with those, whatever ids they get here.
    let place = (ctx.sealed_for, doc_app.unwrap_or_default(), e.id.as_deref().unwrap_or_default(), e.url.as_str());
    let secret = match &e.secret {
        Some(s) => Some(
            EndpointSecret::parse(&open(ctx.transit, place, "secret", s).map_err(at)?)
                .map_err(|err| at(ApiError::Validation(format!("`secret`: {err}"))))?,
        ),
        None => None,
    };
    let headers = match &e.headers {
        Some(h) => {
            let text = open(ctx.transit, place, "headers", h).map_err(at)?;
            let value: HashMap<String, String> = serde_json::from_str(&text).map_err(|err| {
                at(ApiError::Validation(format!("`headers`: not an object of names to values: {err}")))
            })?;
            Some(validate::given_headers(&value).map_err(at)?)
        }
        None => None,
    };
    let id = e.id.as_deref().and_then(|s| EndpointId::parse(s).ok());
    let mut found = None;
    if let Some(id) = &id {
        found = endpoints::get(tx, ctx.tenant, app, &Ref::Id(id.clone())).await?;
        if found.is_none() {
            found = endpoints::get(tx, ctx.tenant, app, &Ref::Id(derived_id(id, app))).await?;
        }
    }
    if let (None, Some(uid)) = (&found, &e.uid) {
        found = endpoints::get(tx, ctx.tenant, app, &Ref::Uid(uid.clone())).await?;
    }
    if found.as_ref().is_some_and(|f| f.kind.is_destination()) {
        return Err(at(ApiError::Conflict("it names a destination, which an import does not change".into())));
    }
    let conflict = |err: StoreError| at(validate::conflict("an endpoint with this uid")(err.into()));
    let id = match found {
        Some(ep) => {
            let mut fields = fields.clone();
            if e.filter.is_none() {
                fields.filter = validate::filter(ep.filter.as_deref()).map_err(at)?;
            }
            endpoints::replace(tx, ctx.tenant, app, &ep.id, &fields).await.map_err(conflict)?;
            if let Some(secret) = &secret {
                let sealed = secrets::seal(ctx.state, ctx.tenant, app, &ep.id, secret);
                endpoints::rotate_secret(tx, ctx.tenant, app, &ep.id, &sealed, Utc::now()).await?;
            }
            tally.endpoints[1] += 1;
            ep.id
        }
        None => {
            crate::v1::endpoint::rows::room_for_one_more(tx, ctx.state, ctx.tenant, app, ctx.ep_cap)
                .await
                .map_err(at)?;
            // A document's id taken by another application's endpoint is not
            // reused; one derived from it and the application is, the same on
            // every run, so a second import finds what the first made.
            let id = match id {
                Some(id) if endpoints::id_free(tx, ctx.tenant, &id).await? => id,
                Some(id) => derived_id(&id, app),
                None => EndpointId::generate(),
            };
            let secret =
                secret.clone().unwrap_or_else(|| EndpointSecret::generate(ctx.state.config.default_signature_type));
            let sealed = secrets::seal(ctx.state, ctx.tenant, app, &id, &secret);
            endpoints::insert(tx, ctx.tenant, app, &id, &fields, &sealed).await.map_err(conflict)?;
            tally.endpoints[0] += 1;
            id
        }
    };
    if let Some(mut headers) = headers {
        // Added to what the endpoint has, never replacing it whole: a header the
        // source could not show (a credential shown by name) and the operator set
        // again here stays.
        if let Some(ep) = endpoints::get(tx, ctx.tenant, app, &Ref::Id(id.clone())).await? {
            let kept =
                secrets::open_headers(ctx.state, ctx.tenant, app, &id, &ep.headers).map_err(ApiError::Internal)?;
            if let (Some(kept), Some(new)) = (kept.as_object(), headers.as_object_mut()) {
                for (k, v) in kept {
                    if !new.keys().any(|n| n.eq_ignore_ascii_case(k)) {
                        new.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        let sealed = secrets::seal_headers(ctx.state, ctx.tenant, app, &id, &headers);
        endpoints::set_headers(tx, ctx.tenant, app, &id, &sealed).await?;
    }
    Ok(())
}

/// The id an endpoint of the document gets in `app` when its own is taken by
/// another application's endpoint: its time, and a hash of it and the application.
fn derived_id(id: &EndpointId, app: &AppId) -> EndpointId {
    EndpointId::derived(id.millis().unwrap_or(0), &format!("{app}:{id}"))
}

/// A sealed value of the document, opened with the transit key.
fn open(
    key: Option<&TransitKey>,
    (tenant, app, ep, url): (&str, &str, &str, &str),
    field: &str,
    s: &Sealed,
) -> Result<String, ApiError> {
    let key = key.ok_or_else(|| {
        ApiError::Validation(format!("`{field}` is sealed, and this installation has no {TRANSIT_SETTING} to open it"))
    })?;
    let bytes = STANDARD.decode(&s.sealed).map_err(|_| ApiError::Validation(format!("`{field}` is not base64")))?;
    let plain = key.open(&purpose(tenant, app, ep, url, field), &bytes).map_err(|_| {
        ApiError::Validation(format!(
            "`{field}` does not open: sealed with another {TRANSIT_SETTING}, exported by another tenant, \
             or for another endpoint or URL"
        ))
    })?;
    String::from_utf8(plain).map_err(|_| ApiError::Validation(format!("`{field}` is not text")))
}

/// An error about one application, naming it.
fn in_app(a: &AppDoc, e: ApiError) -> ApiError {
    let name = a.id.as_deref().or(a.uid.as_deref()).unwrap_or(&a.name);
    match e {
        ApiError::Validation(m) => ApiError::Validation(format!("application `{name}`: {m}")),
        ApiError::Conflict(m) => ApiError::Conflict(format!("application `{name}`: {m}")),
        other => other,
    }
}

/// An error about one endpoint, naming it.
fn in_endpoint(e: &EndpointDoc, err: ApiError) -> ApiError {
    let name = e.id.as_deref().or(e.uid.as_deref()).unwrap_or(&e.url);
    match err {
        ApiError::Validation(m) => ApiError::Validation(format!("endpoint `{name}`: {m}")),
        ApiError::Conflict(m) => ApiError::Conflict(format!("endpoint `{name}`: {m}")),
        other => other,
    }
}
