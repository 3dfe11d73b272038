//! `v1.destination.*`: destinations other than an HTTP endpoint (RabbitMQ,
//! Postgres), as rows of `endpoints` with a kind and a sealed configuration.
//! The SDK's list, create, get, upsert, patch, delete and secret rotation.

use std::collections::HashMap;

use actix_web::{delete, get, http::StatusCode, patch, post, put, web, HttpRequest, HttpResponse};
use hookgate_egress::{destinations::config::Config, secrets, signing::EndpointSecret, ssrf::Guard};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref, TenantId},
    status::EndpointKind,
    store::{
        endpoints::{self, DestinationFields, Endpoint, EndpointFields},
        fifo,
        operational::Notice,
        StoreError,
    },
    AppState,
};
use serde::Deserialize;
use serde_json::Value;

use crate::v1::destination::out::{failure_reason, open, shown, DestinationOut};
use crate::v1::endpoint::headers::values_hidden;
use crate::v1::endpoint::secret::EndpointSecretOut;
use crate::v1::validate::RotateIn;
use crate::v1::{
    applications,
    endpoint::crud::{allowed, check_list, find_any},
    endpoint::rows::{commit, endpoints_cap, notice, room_for_one_more, Notify},
    endpoint::secret::{rotate, Rotated, Rotation},
    validate,
};
use crate::{
    idempotency::{answer, RequestKey},
    optional_json, Maybe, PageQuery, TenantAuth,
};
use hookgate_shared::store::page::Page;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get_one)
        .service(upsert)
        .service(patch_one)
        .service(delete_one)
        .service(rotate_secret);
}

/// Whether a destination is handed messages.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DestinationStatusIn)]
enum StatusIn {
    Enabled,
    Disabled,
}

/// A destination to create, or to replace with (PUT): its `type` and that type's `config`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DestinationIn {
    #[serde(rename = "type")]
    kind: String,
    config: Value,
    uid: Option<String>,
    status: Option<StatusIn>,
    batch_size: Option<i64>,
    max_wait_secs: Option<i64>,
    event_types: Option<Vec<String>>,
    channels: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    metadata: HashMap<String, String>,
    /// Hookgate's: a content filter over the payload, as an endpoint's (absent
    /// from a PUT, the stored one stays; `null` removes it).
    #[serde(default)]
    filter: Maybe<String>,
}

/// A destination's changes: the same `type`'s `config` fields replace the stored
/// ones; another `type`'s `config` is the whole new one.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DestinationPatch {
    #[serde(rename = "type")]
    kind: String,
    config: Value,
    #[serde(default)]
    uid: Maybe<String>,
    status: Option<StatusIn>,
    batch_size: Option<i64>,
    max_wait_secs: Option<i64>,
    #[serde(default)]
    event_types: Maybe<Vec<String>>,
    #[serde(default)]
    channels: Maybe<Vec<String>>,
    metadata: Option<HashMap<String, String>>,
    /// `null` removes the content filter.
    #[serde(default)]
    filter: Maybe<String>,
}

/// Everything a create or a replace writes, checked.
struct Checked {
    fields: EndpointFields,
    config: Config,
    batch_size: i32,
    max_wait_secs: i32,
}

fn check(
    config: Config,
    uid: Option<String>,
    status: Option<StatusIn>,
    batch: (Option<i64>, Option<i64>),
    filters: (Option<Vec<String>>, Option<Vec<String>>),
    metadata: HashMap<String, String>,
    filter: Option<String>,
) -> Result<Checked, ApiError> {
    if let Some(uid) = &uid {
        validate::uid("uid", uid)?;
    }
    // An empty list filters nothing, as Svix's `DestinationIn` says: kept as none.
    let filters = (filters.0.filter(|l| !l.is_empty()), filters.1.filter(|l| !l.is_empty()));
    check_list("eventTypes", &filters.0, 1000)?;
    check_list("channels", &filters.1, 10)?;
    let batch_size = batch.0.unwrap_or(1);
    if !(1..=hookgate_shared::store::fifo::MOST_BATCH).contains(&batch_size) {
        return Err(ApiError::Validation(format!(
            "`batchSize` must be 1 to {}",
            hookgate_shared::store::fifo::MOST_BATCH
        )));
    }
    let max_wait_secs = batch.1.unwrap_or(0);
    if !(0..=300).contains(&max_wait_secs) {
        return Err(ApiError::Validation("`maxWaitSecs` must be 0 to 300".into()));
    }
    let fields = EndpointFields {
        uid,
        url: config.locator(),
        description: String::new(),
        disabled: status == Some(StatusIn::Disabled),
        event_types: filters.0,
        channels: filters.1,
        throttle_rate: None,
        metadata: serde_json::to_value(metadata).expect("a string map serialises"),
        filter: validate::filter(filter.as_deref())?,
    };
    Ok(Checked { fields, config, batch_size: batch_size as i32, max_wait_secs: max_wait_secs as i32 })
}

async fn guard(state: &AppState, tenant: &TenantId) -> Result<Guard, ApiError> {
    allowed(state, tenant).await
}

/// Refuses a configuration that would reach Hookgate's own database or Redis (a 422 naming the field).
async fn refuse_own(config: &Config, guard: &Guard) -> Result<(), ApiError> {
    hookgate_egress::destinations::refuse_own(config, guard).await.map_err(|e| ApiError::Validation(e.0))
}

impl DestinationIn {
    /// Checked; `stored`: the configuration it replaces, whose secrets it keeps
    /// where it sends them back redacted or leaves them out.
    async fn checked(self, guard: &Guard, stored: Option<&Config>) -> Result<Checked, ApiError> {
        let config =
            Config::parse_keeping(&self.kind, self.config, guard, stored).map_err(|e| ApiError::Validation(e.0))?;
        refuse_own(&config, guard).await?;
        check(
            config,
            self.uid,
            self.status,
            (self.batch_size, self.max_wait_secs),
            (self.event_types, self.channels),
            self.metadata,
            self.filter.value().cloned(),
        )
    }
}

/// The destination the path names (by id or uid); 404 for an HTTP endpoint.
pub(super) async fn find(
    state: &AppState,
    tenant: &TenantAuth,
    app: &Ref<AppId>,
    dest: &Ref<EndpointId>,
) -> Result<(AppId, Endpoint), ApiError> {
    match find_any(state, tenant, app, dest).await {
        Ok((app, ep)) if ep.kind.is_destination() => Ok((app, ep)),
        Ok(_) | Err(ApiError::NotFound("endpoint")) => Err(ApiError::NotFound("destination")),
        Err(e) => Err(e),
    }
}

/// The application's destinations (RabbitMQ, Postgres, FIFO and polling endpoints, …).
#[utoipa::path(params(PageQuery), tag = "Destination", operation_id = "hookgate.destination.list", responses((status = 200, body = Page<DestinationOut>)))]
#[get("/app/{app_id}/destination")]
async fn list(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let app = applications::find(&state, &tenant, &path).await?;
    let names_only = values_hidden(&req, &state, &tenant.0).await?;
    let conn = db::conn(&state.db).await?;
    let page = endpoints::list_destinations(&**conn, &tenant.0, &app.id, &q.page::<EndpointId>()?).await?;
    drop(conn);
    let mut data = Vec::with_capacity(page.data.len());
    for ep in page.data {
        let reason = failure_reason(&state, &tenant.0, &app.id, &ep).await?;
        data.push(shown(&state, &tenant.0, &app.id, ep, reason, names_only)?);
    }
    Ok(HttpResponse::Ok().json(Page {
        data,
        iterator: page.iterator,
        prev_iterator: page.prev_iterator,
        done: page.done,
    }))
}

/// Creates a destination; it counts as an endpoint towards the `endpointsPerApp` quota.
#[utoipa::path(tag = "Destination", operation_id = "hookgate.destination.create", responses((status = 201, body = DestinationOut)))]
#[post("/app/{app_id}/destination")]
async fn create(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<DestinationIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let checked = body.into_inner().checked(&guard(&state, &tenant.0).await?, None).await?;
    let app = applications::find(&state, &tenant, &path).await?;
    insert(&state, &tenant.0, &app.id, checked, key.as_deref()).await
}

/// Creates a destination in `app`, within the tenant's `endpointsPerApp` quota
/// (destinations count as endpoints).
async fn insert(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    c: Checked,
    key: Option<&RequestKey>,
) -> Result<HttpResponse, ApiError> {
    let id = EndpointId::generate();
    let secret = secrets::seal(state, tenant, app, &id, &EndpointSecret::generate(state.config.default_signature_type));
    let cap = endpoints_cap(state, tenant).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    room_for_one_more(&*tx, state, tenant, app, cap).await?;
    endpoints::insert(&*tx, tenant, app, &id, &c.fields, &secret)
        .await
        .map_err(|e| validate::conflict("an endpoint or destination with this uid")(e.into()))?;
    let ep = write_destination(&*tx, state, tenant, app, &id, &c).await?;
    let woke = notice(&*tx, Notify::Yes, Notice::endpoint(tenant, "endpoint.created", app, &id)).await?;
    let out = shown(state, tenant, app, ep, None, false)?;
    let res = answer(&*tx, state, key, StatusCode::CREATED, &out).await?;
    commit(tx, state, woke).await?;
    Ok(res)
}

/// The destination, by id or uid, with why it fails if it does.
#[utoipa::path(tag = "Destination", operation_id = "hookgate.destination.get", responses((status = 200, body = DestinationOut)))]
#[get("/app/{app_id}/destination/{destination_id}")]
async fn get_one(
    tenant: TenantAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let names_only = values_hidden(&req, &state, &tenant.0).await?;
    let reason = failure_reason(&state, &tenant.0, &app, &ep).await?;
    Ok(HttpResponse::Ok().json(shown(&state, &tenant.0, &app, ep, reason, names_only)?))
}

/// PUT: replaces the destination, or creates it with the path as its `uid` (201).
#[utoipa::path(tag = "Destination", operation_id = "hookgate.destination.update", responses((status = 200, body = DestinationOut), (status = 201, description = "created under the path as its uid", body = DestinationOut)))]
#[put("/app/{app_id}/destination/{destination_id}")]
async fn upsert(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<DestinationIn>,
) -> Result<HttpResponse, ApiError> {
    let guard = guard(&state, &tenant.0).await?;
    match find(&state, &tenant, &path.0, &path.1).await {
        Ok((app, ep)) => {
            let stored = open(&state, &tenant.0, &app, &ep)?;
            let body = body.into_inner();
            let keep_filter = body.filter == Maybe::Absent;
            let mut checked = body.checked(&guard, Some(&stored)).await?;
            if keep_filter {
                checked.fields.filter = validate::filter(ep.filter.as_deref())?;
            }
            save(&state, &tenant.0, &app, &ep.id, checked).await
        }
        Err(ApiError::NotFound("destination")) if path.1.creatable_uid().is_some() => {
            let mut checked = body.into_inner().checked(&guard, None).await?;
            checked.fields.uid = Some(checked.fields.uid.unwrap_or_else(|| path.1.to_string()));
            let app = applications::find(&state, &tenant, &path.0).await?;
            insert(&state, &tenant.0, &app.id, checked, None).await
        }
        Err(e) => Err(e),
    }
}

/// Changes the fields the body names and keeps the others.
#[utoipa::path(tag = "Destination", operation_id = "hookgate.destination.patch", responses((status = 200, body = DestinationOut)))]
#[patch("/app/{app_id}/destination/{destination_id}")]
async fn patch_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Json<DestinationPatch>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner();
    let (app, found) = find(&state, &tenant, &path.0, &path.1).await?;
    let guard = guard(&state, &tenant.0).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let ep = endpoints::get_for_update(&*tx, &tenant.0, &app, &found.id)
        .await?
        .filter(|e| e.kind.is_destination())
        .ok_or(ApiError::NotFound("destination"))?;
    let stored = open(&state, &tenant.0, &app, &ep)?;
    // The same type: the config's fields given replace the stored ones. Another
    // type: the config given is the whole of the new one.
    let config = match ep.kind.type_name() == Some(p.kind.as_str()) {
        true => stored.patched(&p.config, &guard),
        false => Config::parse(&p.kind, p.config, &guard),
    }
    .map_err(|e| ApiError::Validation(e.0))?;
    refuse_own(&config, &guard).await?;
    let status = p.status.or(Some(if ep.disabled { StatusIn::Disabled } else { StatusIn::Enabled }));
    let checked = check(
        config,
        p.uid.into_update().unwrap_or(ep.uid),
        status,
        (p.batch_size.or(ep.batch_size.map(i64::from)), p.max_wait_secs.or(ep.max_wait_secs.map(i64::from))),
        (p.event_types.into_update().unwrap_or(ep.event_types), p.channels.into_update().unwrap_or(ep.channels)),
        p.metadata.unwrap_or_else(|| serde_json::from_value(ep.metadata).unwrap_or_default()),
        p.filter.into_update().unwrap_or(ep.filter),
    )?;
    save_in(tx, &state, &tenant.0, &app, &ep.id, checked).await
}

async fn save(
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    c: Checked,
) -> Result<HttpResponse, ApiError> {
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    save_in(tx, state, tenant, app, id, c).await
}

async fn save_in(
    tx: db::Transaction<'_>,
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    c: Checked,
) -> Result<HttpResponse, ApiError> {
    let was = endpoints::get_for_update(&*tx, tenant, app, id).await?.ok_or(ApiError::NotFound("destination"))?;
    // Pushed kinds have deliveries; FIFO and polling endpoints read a log: a
    // change between the two would strand one or the other.
    if (was.kind.is_sink() || c.config.kind().is_sink()) && was.kind != c.config.kind() {
        return Err(ApiError::Validation(format!(
            "a {} cannot become a {}: make a new destination",
            was.kind.type_name().unwrap_or("destination"),
            c.config.kind().type_name().unwrap_or("destination")
        )));
    }
    // A FIFO endpoint's order is per key: another key would mix orders already begun.
    if was.kind == EndpointKind::FifoEndpoint && was.fifo_key != c.config.fifo_key() {
        return Err(ApiError::Validation("a FIFO endpoint's `key` cannot change: make a new destination".into()));
    }
    endpoints::replace(&*tx, tenant, app, id, &c.fields)
        .await
        .map_err(|e| validate::conflict("an endpoint or destination with this uid")(e.into()))?
        .ok_or(ApiError::NotFound("destination"))?;
    let ep = write_destination(&*tx, state, tenant, app, id, &c).await?;
    let woke = notice(&*tx, Notify::Yes, Notice::endpoint(tenant, "endpoint.updated", app, id)).await?;
    let out = shown(state, tenant, app, ep, None, false)?;
    commit(tx, state, woke).await?;
    Ok(HttpResponse::Ok().json(out))
}

/// Makes the endpoint row `id` (just inserted or replaced, in `tx`) the checked
/// destination: its kind, sealed configuration and batching, and a FIFO
/// endpoint's progress row (woken while enabled).
async fn write_destination(
    tx: &impl tokio_postgres::GenericClient,
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    id: &EndpointId,
    c: &Checked,
) -> Result<Endpoint, ApiError> {
    let dest = DestinationFields {
        kind: c.config.kind(),
        sealed: c.config.seal(state, tenant, app, id),
        batch_size: c.batch_size,
        max_wait_secs: c.max_wait_secs,
        fifo_key: c.config.fifo_key(),
    };
    let ep = endpoints::set_destination(tx, tenant, app, id, &dest).await?.ok_or(ApiError::NotFound("destination"))?;
    if ep.kind == EndpointKind::FifoEndpoint {
        fifo::init(tx, tenant, app, id).await?;
        // Enabled (again): its parked rows catch up on what was logged meanwhile.
        // After the change, in its transaction: see `fifo::end`.
        if !ep.disabled {
            fifo::wake_endpoint(tx, tenant, app, id).await?;
        }
    }
    Ok(ep)
}

/// Deletes the destination.
#[utoipa::path(tag = "Destination", operation_id = "hookgate.destination.delete", responses((status = 204, description = "deleted")))]
#[delete("/app/{app_id}/destination/{destination_id}")]
async fn delete_one(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let mut n = Notice::endpoint(&tenant.0, "endpoint.deleted", &app, &ep.id);
    n.endpoint_uid = ep.uid.clone();
    // Written first: the payload is built while the row still exists.
    let woke = notice(&*tx, Notify::Yes, n).await?;
    if !endpoints::delete(&*tx, &tenant.0, &app, &ep.id).await? {
        return Err(ApiError::NotFound("destination"));
    }
    commit(tx, &state, woke).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Rotates the secret that signs what the destination receives (the
/// `webhook-signature` header of a RabbitMQ message); 200 with the new key.
#[utoipa::path(
    tag = "Destination",
    operation_id = "hookgate.destination.rotate-secret",
    request_body(content = Option<RotateIn>, description = "optional: an empty body rotates to a new key"),
    responses((status = 200, body = EndpointSecretOut))
)]
#[post("/app/{app_id}/destination/{destination_id}/secret/rotate")]
async fn rotate_secret(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let rotation = Rotation::asked(&state, &optional_json(&body)?)?;
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    rotate(&state, &tenant.0, &app, &ep.id, rotation, key.as_deref(), Rotated::ShowKey).await
}
