//! What the SDK's `message` group has beside create/list/get: `precheck` (would a
//! message reach anyone?), `bulk_expunge_content` and `expunge_all_contents`.

use std::collections::BTreeMap;

use actix_web::{post, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, MessageId, Ref},
    store::{erasure, fanout, messages, tasks, StoreError},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::RequestKey;
use crate::v1::tasks::TaskStarted;
use crate::v1::{applications::find as find_app, validate};
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(precheck).service(bulk_expunge).service(expunge_all);
}

/// Ids one bulk expunge may name: each is a lookup and an update in one transaction.
const MOST_IDS: usize = 500;

/// The message that would be sent: its event type and channels.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = MessagePrecheckIn)]
struct PrecheckIn {
    event_type: String,
    channels: Option<Vec<String>>,
}

/// Whether such a message would reach any endpoint or destination now.
#[derive(Serialize, ToSchema)]
#[schema(as = MessagePrecheckOut)]
struct PrecheckOut {
    active: bool,
}

/// Whether a message of this event type (and channels) would reach any enabled
/// endpoint or destination of the application now, by the fan-out's own rule.
/// Nothing is made; a message created a moment later may find it otherwise.
#[utoipa::path(tag = "Message", operation_id = "v1.message.precheck", responses((status = 200, body = PrecheckOut)))]
#[post("/app/{app_id}/msg/precheck/active")]
async fn precheck(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<PrecheckIn>,
) -> Result<HttpResponse, ApiError> {
    validate::uid("eventType", &body.event_type)?;
    if let Some(channels) = &body.channels {
        validate::channels(channels)?;
    }
    let app = find_app(&state, &tenant, &path).await?;
    let conn = db::conn(&state.db).await?;
    let active = fanout::any_matching(&**conn, &tenant.0, &app.id, &body.event_type, body.channels.as_deref()).await?;
    Ok(HttpResponse::Ok().json(PrecheckOut { active }))
}

/// The messages whose payloads to erase, by id or `eventId`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BulkExpungeContentsIn)]
struct BulkExpungeIn {
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    ids: Vec<String>,
}

/// Per name given, what became of its message's payload.
#[derive(Serialize, ToSchema)]
#[schema(as = BulkExpungeContentsOut)]
struct BulkExpungeOut {
    results: BTreeMap<String, BulkExpungeStatus>,
}

/// What became of one message's payload.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
enum BulkExpungeStatus {
    Expunged,
    NotFound,
}

/// Erases the payloads of the messages named (by id or `eventId`), as
/// `DELETE …/msg/{id}/content` does one; answers per name `expunged` or
/// `not-found`. All or none: the erasures commit together.
#[utoipa::path(tag = "Message", operation_id = "v1.message.bulk-expunge-content", responses((status = 200, body = BulkExpungeOut)))]
#[post("/app/{app_id}/msg/bulk-expunge")]
async fn bulk_expunge(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<BulkExpungeIn>,
) -> Result<HttpResponse, ApiError> {
    // The tenant's alone, as for one message: a portal link cannot erase content.
    let tenant = TenantAuth(key.0);
    if body.ids.len() > MOST_IDS {
        return Err(ApiError::Validation(format!("`ids`: at most {MOST_IDS} a request")));
    }
    let names = body
        .ids
        .iter()
        .map(|id| Ref::<MessageId>::parse(id).map(|r| (id, r)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::Validation(format!("`ids`: {e}")))?;
    let app = find_app(&state, &tenant, &path).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let mut results = BTreeMap::new();
    for (name, r) in names {
        let found = match messages::get(&*tx, &tenant.0, &app.id, &r).await? {
            Some(m) => erasure::expunge_message(&*tx, &tenant.0, &app.id, &m.id).await?,
            None => false,
        };
        results.insert(name.clone(), if found { BulkExpungeStatus::Expunged } else { BulkExpungeStatus::NotFound });
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().json(BulkExpungeOut { results }))
}

/// Erases the payload of every message the application has now, as a
/// background task (`application.purge_content`) the workers run in bounded
/// steps; its `data.messagesPurged` counts them. Messages made after the
/// request keep theirs.
#[utoipa::path(tag = "Message", operation_id = "v1.message.expunge-all-contents", responses((status = 202, body = TaskStarted)))]
#[post("/app/{app_id}/msg/expunge-all-contents")]
async fn expunge_all(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let tenant = TenantAuth(key.0);
    let app = find_app(&state, &tenant, &path).await?;
    crate::v1::tasks::start_app_task(&state, &tenant, &app.id, tasks::TaskKind::PurgeContent, request.as_deref()).await
}
