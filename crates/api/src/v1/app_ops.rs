//! Svix's operations on an application beyond CRUD: its alert e-mail, an
//! endpoint's throttling status, and the tenant's event types exported as an
//! OpenAPI document (its attempt statistics: `attempt_stats`).

use actix_web::{get, http::StatusCode, patch, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    store::{applications, destination_ops, event_types, page::PageRequest, tasks},
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{applications::find as find_app, endpoint::crud::find_any, tasks::TaskStarted, validate};
use crate::idempotency::{answer, RequestKey};
use crate::{KeyAuth, TenantAuth};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(alert_email).service(throttling_status).service(export_openapi);
}

/// Event types an export holds at most (as an environment export).
const MOST_EXPORTED: usize = 10_000;
/// The most an export's schemas may weigh (as JSON), all versions of the types
/// read: the document is built in memory and kept in the task's `data`.
const EXPORT_SCHEMA_BYTES: usize = 8 << 20;

/// The size of `v` written as JSON, without writing it anywhere.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Svix's `AlertEmailPatch`: comma-separated addresses; `null` or empty clears them.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(as = AlertEmailPatch)]
struct AlertEmailIn {
    email: Option<String>,
}

/// Sets the addresses the application's alerts go to (204): an e-mail when one
/// of its endpoints is disabled, fails for a while or exhausts a message's
/// attempts (as the tenant's `alert-settings` choose), through the operator's
/// SMTP server (`store::alerts`).
#[utoipa::path(tag = "Application", operation_id = "v1.application.patch-alert-email", responses((status = 204, description = "stored")))]
#[patch("/app/{app_id}/alert-email")]
async fn alert_email(
    key: KeyAuth,
    state: web::Data<AppState>,
    path: web::Path<Ref<AppId>>,
    body: web::Json<AlertEmailIn>,
) -> Result<HttpResponse, ApiError> {
    let email = body.email.as_deref().map(|e| validate::emails("email", e)).transpose()?.flatten();
    let app = find_app(&state, &TenantAuth(key.0.clone()), &path).await?;
    let conn = db::conn(&state.db).await?;
    if !applications::set_alert_email(&**conn, &key.0, &app.id, email.as_deref()).await? {
        return Err(ApiError::NotFound("application"));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// Svix's `EndpointRateLimitStatus`.
#[derive(Serialize, ToSchema)]
enum EndpointRateLimitStatus {
    Ok,
    RateLimited,
}

/// Svix's `EndpointThrottleRateStatusOut`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct EndpointThrottleRateStatusOut {
    status: EndpointRateLimitStatus,
    /// Since when the oldest delivery held back has been due, while throttled.
    throttled_since: Option<DateTime<Utc>>,
}

/// `RateLimited` while the endpoint's `throttleRate` (or its application's)
/// holds deliveries back: more are due now than it sends in a second.
#[utoipa::path(tag = "Endpoint", operation_id = "v1.endpoint.get-throttling-status", responses((status = 200, body = EndpointThrottleRateStatusOut)))]
#[get("/app/{app_id}/endpoint/{endpoint_id}/rate-limit-status")]
async fn throttling_status(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
) -> Result<HttpResponse, ApiError> {
    let (app, ep) = find_any(&state, &tenant, &path.0, &path.1).await?;
    let rate = match ep.throttle_rate {
        Some(r) => Some(r),
        None => find_app(&state, &tenant, &Ref::Id(app.clone())).await?.throttle_rate,
    };
    let out = match rate.filter(|r| *r > 0) {
        None => EndpointThrottleRateStatusOut { status: EndpointRateLimitStatus::Ok, throttled_since: None },
        Some(rate) => {
            let conn = db::conn(&state.db).await?;
            let (due, oldest) =
                destination_ops::due_backlog(&**conn, &tenant.0, &app, &ep.id, i64::from(rate) + 1).await?;
            match due > i64::from(rate) {
                true => EndpointThrottleRateStatusOut {
                    status: EndpointRateLimitStatus::RateLimited,
                    throttled_since: oldest,
                },
                false => EndpointThrottleRateStatusOut { status: EndpointRateLimitStatus::Ok, throttled_since: None },
            }
        }
    };
    Ok(HttpResponse::Ok().json(out))
}

/// The tenant's live event types as an OpenAPI 3.1 document: one `webhooks`
/// entry per type, its schema version "1" (else the highest) as the body.
fn document(types: Vec<event_types::EventType>) -> Value {
    let mut webhooks = Map::new();
    for t in types.into_iter().filter(|t| !t.archived) {
        let schemas = t.schemas.as_ref().and_then(Value::as_object);
        let schema = schemas
            .and_then(|s| {
                s.get("1").or_else(|| s.iter().max_by_key(|(k, _)| k.parse::<u64>().unwrap_or(0)).map(|(_, v)| v))
            })
            .cloned();
        let mut op = json!({
            "operationId": t.name,
            "description": t.description,
            "requestBody": {"content": {"application/json": {"schema": schema.unwrap_or_else(|| json!({}))}}},
            "responses": {"2XX": {"description": "Return any 2XX status to indicate that the data was received successfully"}},
        });
        if t.deprecated {
            op["deprecated"] = json!(true);
        }
        webhooks.insert(t.name, json!({ "post": op }));
    }
    json!({"openapi": "3.1.0", "info": {"title": "Webhooks", "version": "1.0.0"}, "paths": {}, "webhooks": webhooks})
}

/// Svix's `ExportEventTypeOut`: the task, finished at once; the document is its
/// `data.openapi` (`GET /api/v1/background-task/{id}`).
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.export-openapi", responses((status = 202, body = TaskStarted)))]
#[post("/event-type/export/openapi")]
async fn export_openapi(
    key: KeyAuth,
    state: web::Data<AppState>,
    request: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    super::statistics::within_rate(&**conn, &key.0, tasks::TaskKind::SdkGenerate).await?;
    let mut types = Vec::new();
    let mut page = PageRequest::new(Some(250), None);
    let mut weight = 0;
    loop {
        let got = event_types::list(&**conn, &key.0, &page, false, None).await?;
        let next = got.iterator.clone();
        weight += got.data.iter().filter_map(|t| t.schemas.as_ref()).map(json_len).sum::<usize>();
        if weight > EXPORT_SCHEMA_BYTES {
            return Err(ApiError::Coded {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                code: "export_too_large",
                detail: format!(
                    "the tenant's event types' schemas weigh more than the {} MiB an export holds",
                    EXPORT_SCHEMA_BYTES >> 20
                ),
            });
        }
        types.extend(got.data);
        if types.len() > MOST_EXPORTED {
            return Err(ApiError::Conflict(format!("the tenant has more than {MOST_EXPORTED} event types to export")));
        }
        match next.filter(|_| !got.done) {
            Some(after) => page = PageRequest::following(250, Some(after)),
            None => break,
        }
    }
    let now = Utc::now();
    let data = json!({ "openapi": document(types) });
    let task = tasks::create_finished(&**conn, &key.0, tasks::TaskKind::SdkGenerate, (now, now), &data).await?;
    answer(&**conn, &state, request.as_deref(), StatusCode::ACCEPTED, &super::tasks::task_started(&task)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_counts_the_bytes_a_value_is_written_as() {
        let v = json!({"type": "object", "properties": {"id": {"type": "string"}}, "name": "é"});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }
}
