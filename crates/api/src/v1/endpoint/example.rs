//! `v1.endpoint.send-example`: a test event to this endpoint only, past its filters.

use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, MessageId, Ref},
    store::{event_types, messages, messages::NewMessage, StoreError},
    AppState,
};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::{answer, RequestKey};
use crate::{optional_json, FeatureFlags, TenantAuth};
use actix_web::{http::StatusCode, post, web, HttpResponse};

use super::crud::find_any as find;
use crate::v1::{message::crud::MessageOut, validate};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(send_example);
}

/// Which event type's example to send (absent: `svix.ping`), and which of its examples.
#[derive(Deserialize, Default, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EventExampleIn)]
struct ExampleIn {
    event_type: Option<String>,
    /// Which of the schema's examples (Svix's `exampleIndex`).
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    example_index: usize,
    /// Hookgate's: the payload to send instead of the example (a JSON object of
    /// at most 64 KiB), as the portal's test lets a customer edit it.
    #[schema(value_type = Option<Object>)]
    payload: Option<serde_json::Value>,
}

/// The most a test event's own payload may weigh.
const MOST_TEST_PAYLOAD: usize = 64 * 1024;

/// The event type Svix uses for a test without one.
const PING: &str = "svix.ping";

/// Sends one message to this endpoint only, past its filters: the event type's
/// example from its schema (`schemas.<version>.examples[i]`, or `example`), or
/// `{"success": true}` for `svix.ping` and a type without an example.
#[utoipa::path(
    tag = "Endpoint",
    operation_id = "v1.endpoint.send-example",
    request_body = Option<ExampleIn>,
    responses((status = 202, body = MessageOut))
)]
#[post("/app/{app_id}/endpoint/{endpoint_id}/send-example")]
async fn send_example(
    tenant: TenantAuth,
    flags: FeatureFlags,
    state: web::Data<AppState>,
    path: web::Path<(Ref<AppId>, Ref<EndpointId>)>,
    body: web::Bytes,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    let body: ExampleIn = optional_json(&body)?;
    let event_type = body.event_type.unwrap_or_else(|| PING.to_owned());
    validate::uid("eventType", &event_type)?;
    let given = match body.payload {
        None | Some(serde_json::Value::Null) => None,
        Some(p @ serde_json::Value::Object(_)) if p.to_string().len() <= MOST_TEST_PAYLOAD => Some(p),
        Some(serde_json::Value::Object(_)) => {
            return Err(ApiError::Validation(format!("`payload` must be at most {MOST_TEST_PAYLOAD} bytes")))
        }
        Some(_) => return Err(ApiError::Validation("`payload` must be a JSON object".into())),
    };
    let (app, ep) = find(&state, &tenant, &path.0, &path.1).await?;
    // A disabled endpoint would take the message and never be sent it.
    if ep.disabled {
        return Err(ApiError::Validation("the endpoint is disabled: enable it to send it a test event".into()));
    }
    let payload = match event_type.as_str() {
        PING => given.unwrap_or_else(|| json!({ "success": true })),
        name => {
            let conn = db::conn(&state.db).await?;
            let et = event_types::get_visible(&**conn, &tenant.0, name, flags.0.as_deref())
                .await?
                .ok_or(ApiError::NotFound("event type"))?;
            if et.archived {
                return Err(ApiError::Validation(format!("event type `{name}` is archived")));
            }
            given
                .or_else(|| example(et.schemas.as_ref(), body.example_index))
                .unwrap_or_else(|| json!({ "success": true }))
        }
    };
    // A test event is a message like any other: it counts against the tenant's
    // `messagesPerSecond` and `messagesPerDay`, whoever sends it (a portal link
    // included). Taken after every check that can refuse the request.
    let reservation = crate::quota::admit_message(&state, &tenant.0).await?;
    let new = NewMessage {
        id: MessageId::generate(),
        event_id: None,
        event_type,
        channels: None,
        // Marked, since its payload may be the caller's: the streams leave it out.
        tags: Some(vec![hookgate_shared::store::message_stream::TEST_EVENT_TAG.to_owned()]),
        payload: payload.to_string().into_bytes(),
        content_type: "application/json".into(),
        idempotency_key: None,
        request_key: None,
        traceparent: None,
        payload_expires_at: None,
    };
    // The message and its `Idempotency-Key` answer commit together: a retry after
    // a lost answer replays it rather than sending a second test event.
    // Everything up to the commit: an error before it created nothing, so the
    // day's place goes back (not after a failed commit, whose outcome is unknown).
    let staged = async {
        let mut conn = db::conn(&state.db).await?;
        let tx = conn.transaction().await.map_err(StoreError::from)?;
        let msg = messages::publish_to_endpoint(&*tx, &tenant.0, &app, &ep.id, &new)
            .await?
            .ok_or_else(|| ApiError::Validation("the endpoint is disabled or gone: no test event was sent".into()))?;
        let res = answer(&*tx, &state, key.as_deref(), StatusCode::ACCEPTED, &MessageOut::new(msg, true)).await?;
        // The commit's own failure is the outer `Ok(Err(..))`: its outcome is unknown.
        Ok::<_, ApiError>(tx.commit().await.map_err(StoreError::from).map(|()| res))
    };
    let res = match staged.await {
        Ok(committed) => committed?,
        Err(e) => {
            if let Some(r) = reservation {
                crate::quota::message_not_created(&state, &tenant.0, r).await;
            }
            return Err(e);
        }
    };
    state.wake.poke();
    Ok(res)
}

/// The `i`th example of the newest schema version that has one.
fn example(schemas: Option<&serde_json::Value>, i: usize) -> Option<serde_json::Value> {
    let versions = schemas?.as_object()?;
    let mut keys: Vec<&String> = versions.keys().collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.parse::<u32>().unwrap_or(0)));
    keys.into_iter().find_map(|k| {
        let s = &versions[k];
        let found = s.get("examples").and_then(|e| e.get(i)).or_else(|| (i == 0).then(|| s.get("example")).flatten());
        found.filter(|v| v.is_object()).cloned()
    })
}

#[cfg(test)]
mod tests {
    use super::example;
    use serde_json::json;

    #[test]
    fn the_example_comes_from_the_newest_schema_version_that_has_one() {
        let schemas = json!({"1": {"examples": [{"a": 1}, {"a": 2}]}, "2": {"example": {"b": 1}}, "3": {}});
        assert_eq!(example(Some(&schemas), 0), Some(json!({"b": 1})));
        assert_eq!(example(Some(&schemas), 1), Some(json!({"a": 2})));
        assert_eq!(example(Some(&json!({"1": {"examples": ["text"]}})), 0), None);
        assert_eq!(example(None, 0), None);
    }
}
