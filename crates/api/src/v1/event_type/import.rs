//! `v1.event-type.import-openapi`: event types, with their schemas, from the
//! webhooks of an OpenAPI 3.1 document (`webhooks`, or `x-webhooks` as 3.0
//! documents write them).

use actix_web::{post, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    store::{event_types, StoreError},
    AppState,
};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::v1::expand;
use crate::KeyAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(import);
}

/// Webhooks one document may hold.
const MOST_WEBHOOKS: usize = 1000;
/// Memory the request's JSON may take once parsed (charged as
/// [`expand::Budget`] counts it): small objects grow a hundredfold in memory.
const MOST_BODY_BYTES: usize = 32 << 20;
/// Memory a YAML `specRaw` may expand to: an alias repeats what it names, so a
/// small text can stand for billions of values, or gigabytes of one string.
const MOST_YAML_BYTES: usize = 64 << 20;
/// Memory one document's schemas may expand to once their `$ref`s are inlined:
/// references that branch grow exponentially with depth, and each copies what
/// it names, long strings and all.
const MOST_INLINED_BYTES: usize = 32 << 20;
/// Imports reading and expanding at once, across tenants: each may hold its budgets.
const MOST_EXPANDING: usize = 2;
/// Longest an import waits for its turn to expand before it is answered 429.
const MOST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

// The shape the API document gives; the handler reads the body itself, within
// its budget, as `fields` does.
/// The document to import: exactly one of `spec` (a JSON object) and `specRaw` (JSON or YAML text).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = EventTypeImportOpenApiIn)]
#[allow(dead_code)]
struct ImportIn {
    spec: Option<Value>,
    spec_raw: Option<String>,
    /// Archives the event types the document does not name.
    #[serde(default)]
    replace_all: bool,
    /// Changes nothing: `to_modify` lists what would be written.
    #[serde(default)]
    dry_run: bool,
}

/// What the import wrote (or, with `dryRun`, would write).
#[derive(Serialize, ToSchema)]
#[schema(as = EventTypeImportOpenApiOut)]
struct ImportOut {
    data: Imported,
}

/// The event types written, to be written (`dryRun` only, else `null`) and archived.
#[derive(Serialize, ToSchema)]
#[schema(as = EventTypeImportOpenApiOutData)]
struct Imported {
    modified: Vec<String>,
    to_modify: Option<Vec<FromSpec>>,
    archived: Vec<String>,
}

/// One event type read from a webhook (`EventTypeFromOpenApi`).
#[derive(Debug, PartialEq, Serialize, ToSchema)]
#[schema(as = EventTypeFromOpenApi)]
struct FromSpec {
    name: String,
    description: String,
    deprecated: bool,
    /// The request body's JSON schema, `$ref`s inlined, under version `"1"`.
    schemas: Option<Value>,
}

/// Creates or updates an event type per webhook (an archived one is brought
/// back; its feature flag is kept); with `replaceAll`, archives those the
/// document does not name; with `dryRun`, changes nothing and lists in
/// `to_modify` what it would write. All in one transaction.
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.import-openapi", request_body = ImportIn, responses((status = 200, body = ImportOut)))]
#[post("/event-type/import/openapi")]
async fn import(key: KeyAuth, state: web::Data<AppState>, body: web::Bytes) -> Result<HttpResponse, ApiError> {
    // Reading the body and expanding the document take CPU and up to their
    // budgets of memory: off the async runtime, and a few at a time across
    // tenants. The turn goes with the work, so a request that goes away does
    // not free it while the work still runs.
    let turn = tokio::time::timeout(MOST_WAIT, expanding().clone().acquire_owned()).await;
    let Ok(Ok(turn)) = turn else {
        return Err(ApiError::RateLimited {
            detail: "other OpenAPI imports are expanding their documents; try again shortly".into(),
            retry_after_secs: MOST_WAIT.as_secs(),
        });
    };
    let (found, replace_all, dry_run) = web::block(move || {
        let _turn = turn;
        let body = expand::json(&body, &expand::Budget::new(MOST_BODY_BYTES)).map_err(|e| match e.is_data() {
            true => ApiError::Validation(e.to_string()),
            false => ApiError::BadRequest(format!("invalid JSON body: {e}")),
        })?;
        let (spec, replace_all, dry_run) = fields(body)?;
        let spec = match spec {
            Spec::Parsed(spec) => spec,
            Spec::Raw(raw) => expand::yaml::read(&raw, &expand::Budget::new(MOST_YAML_BYTES))
                .map_err(|e| ApiError::BadRequest(format!("`specRaw` is neither JSON nor YAML: {e}")))?,
        };
        Ok::<_, ApiError>((read_webhooks(&spec)?, replace_all, dry_run))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    let names: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
    let mut conn = db::conn(&state.db).await?;
    if dry_run {
        let archived = match replace_all {
            true => event_types::live_except(&**conn, &key.0, &names).await?,
            false => Vec::new(),
        };
        let data = Imported { modified: Vec::new(), to_modify: Some(found), archived };
        return Ok(HttpResponse::Ok().json(ImportOut { data }));
    }
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    for f in &found {
        let before = event_types::get_for_update(&*tx, &key.0, &f.name).await?;
        let now = chrono::Utc::now();
        let row = event_types::EventType {
            name: f.name.clone(),
            description: f.description.clone(),
            archived: false,
            deprecated: f.deprecated,
            schemas: f.schemas.clone(),
            feature_flag: before.as_ref().and_then(|b| b.feature_flag.clone()),
            created_at: now,
            updated_at: now,
        };
        event_types::upsert(&*tx, &key.0, &row).await?;
    }
    let archived = match replace_all {
        true => event_types::archive_except(&*tx, &key.0, &names).await?,
        false => Vec::new(),
    };
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(imported = names.len(), archived = archived.len(), "event types imported from OpenAPI");
    Ok(HttpResponse::Ok().json(ImportOut { data: Imported { modified: names, to_modify: None, archived } }))
}

/// The turns to read and expand a document, across tenants.
fn expanding() -> &'static std::sync::Arc<tokio::sync::Semaphore> {
    static TURNS: std::sync::OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    TURNS.get_or_init(|| std::sync::Arc::new(tokio::sync::Semaphore::new(MOST_EXPANDING)))
}

/// The document as given.
enum Spec {
    Parsed(Value),
    Raw(String),
}

/// The body's fields, as [`ImportIn`] describes them: the document, `replaceAll`, `dryRun`.
fn fields(body: Value) -> Result<(Spec, bool, bool), ApiError> {
    let bad = |m: String| ApiError::Validation(m);
    let Value::Object(mut fields) = body else { return Err(bad("the body is not a JSON object".into())) };
    let spec = fields.remove("spec").filter(|v| !v.is_null());
    let raw = match fields.remove("specRaw") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(bad("`specRaw` is not a string".into())),
    };
    let mut flag = |name: &str| match fields.remove(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(bad(format!("`{name}` is not a boolean"))),
    };
    let (replace_all, dry_run) = (flag("replaceAll")?, flag("dryRun")?);
    if let Some(unknown) = fields.keys().next() {
        return Err(bad(format!(
            "unknown field `{unknown}`, expected one of `spec`, `specRaw`, `replaceAll`, `dryRun`"
        )));
    }
    let spec = match (spec, raw) {
        (Some(spec), None) => Spec::Parsed(spec),
        (None, Some(raw)) => Spec::Raw(raw),
        _ => return Err(ApiError::BadRequest("give exactly one of `spec` and `specRaw`".into())),
    };
    Ok((spec, replace_all, dry_run))
}

/// The event types a document's webhooks describe, in the document's order.
fn read_webhooks(spec: &Value) -> Result<Vec<FromSpec>, ApiError> {
    let bad = |m: String| ApiError::Validation(m);
    let Some(spec) = spec.as_object() else { return Err(bad("the document is not a JSON object".into())) };
    let hooks = match spec.get("webhooks").or_else(|| spec.get("x-webhooks")) {
        Some(Value::Object(h)) => h,
        Some(_) => return Err(bad("`webhooks` is not an object of named webhooks".into())),
        None => return Err(bad("the document has no `webhooks` (or `x-webhooks`)".into())),
    };
    if hooks.len() > MOST_WEBHOOKS {
        return Err(bad(format!("at most {MOST_WEBHOOKS} webhooks a document")));
    }
    let components = spec.get("components").and_then(|c| c.get("schemas")).and_then(Value::as_object);
    let mut out = Vec::with_capacity(hooks.len());
    let budget = expand::Budget::new(MOST_INLINED_BYTES);
    for (name, item) in hooks {
        if !hookgate_shared::ids::is_uid(name) || name.starts_with('-') {
            return Err(bad(format!(
                "webhook `{name}`: an event type name is 1 to 256 of a-z A-Z 0-9 - _ ., not starting with -"
            )));
        }
        // The operation: `post` as webhooks are sent, else the item's first one.
        let op = item
            .get("post")
            .or_else(|| item.as_object().and_then(|o| o.values().find(|v| v.get("requestBody").is_some())))
            .ok_or_else(|| bad(format!("webhook `{name}` has no operation with a `requestBody`")))?;
        let description = ["description", "summary"]
            .iter()
            .find_map(|k| op.get(*k).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let media = op
            .get("requestBody")
            .and_then(|b| b.get("content"))
            .and_then(|c| c.get("application/json").or_else(|| c.as_object().and_then(|o| o.values().next())));
        let schemas = match media.and_then(|m| m.get("schema")) {
            None => None,
            Some(schema) => {
                let mut schema = expand::inline(schema, components, (0, 0), &budget)
                    .map_err(|e| bad(format!("webhook `{name}`: its schema, its `$ref`s inlined, {e}")))?;
                if let (Some(example), Some(obj)) = (media.and_then(|m| m.get("example")), schema.as_object_mut()) {
                    obj.entry("examples").or_insert_with(|| json!([example]));
                }
                Some(json!({ "1": schema }))
            }
        };
        let deprecated = op.get("deprecated").and_then(Value::as_bool).unwrap_or(false);
        out.push(FromSpec { name: name.clone(), description, deprecated, schemas });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_become_event_types_with_their_references_inlined() {
        let spec = json!({
            "openapi": "3.1.0",
            "webhooks": {
                "user.created": { "post": {
                    "description": "A user signed up",
                    "requestBody": { "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/User" },
                        "example": { "id": "u1" }
                    } } }
                } },
                "user.gone": { "post": { "summary": "Gone", "deprecated": true,
                    "requestBody": { "content": { "application/json": { "schema": { "type": "object" } } } } } }
            },
            "components": { "schemas": {
                "User": { "type": "object", "properties": { "id": { "$ref": "#/components/schemas/Id" } } },
                "Id": { "type": "string" }
            } }
        });
        let found = read_webhooks(&spec).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].name, "user.created");
        assert_eq!(found[0].description, "A user signed up");
        let schema = &found[0].schemas.as_ref().unwrap()["1"];
        assert_eq!(schema["properties"]["id"], json!({ "type": "string" }));
        assert_eq!(schema["examples"], json!([{ "id": "u1" }]));
        assert!(found[1].deprecated);
        assert_eq!(found[1].description, "Gone");
    }

    #[test]
    fn a_circular_reference_stops_and_a_bad_name_is_refused() {
        let spec = json!({
            "x-webhooks": { "node": { "post": { "requestBody": { "content": { "application/json": {
                "schema": { "$ref": "#/components/schemas/Node" } } } } } } },
            "components": { "schemas": { "Node": { "properties": { "next": { "$ref": "#/components/schemas/Node" } } } } }
        });
        let found = read_webhooks(&spec).unwrap();
        assert_eq!(found[0].name, "node");
        // A reference that doubles at each level would make 2^16 copies: refused.
        let wide = json!({
            "webhooks": { "w": { "post": { "requestBody": { "content": { "application/json": {
                "schema": { "$ref": "#/components/schemas/W" } } } } } } },
            "components": { "schemas": { "W": { "allOf": [
                { "$ref": "#/components/schemas/W" }, { "$ref": "#/components/schemas/W" }, { "$ref": "#/components/schemas/W" }
            ] } } }
        });
        assert!(matches!(read_webhooks(&wide), Err(ApiError::Validation(m)) if m.contains("expand")));
        // A reference that nests one level deeper each time would be stored
        // deeper than a JSON reader reads back: refused.
        let mut deep = json!({ "type": "string" });
        for _ in 0..60 {
            deep = json!({ "properties": { "x": deep } });
        }
        let nested = json!({
            "webhooks": { "d": { "post": { "requestBody": { "content": { "application/json": {
                "schema": { "$ref": "#/components/schemas/D" } } } } } } },
            "components": { "schemas": { "D": { "allOf": [deep, { "$ref": "#/components/schemas/D" }] } } }
        });
        assert!(matches!(read_webhooks(&nested), Err(ApiError::Validation(m)) if m.contains("nest")));
        let bad = json!({ "webhooks": { "no spaces": { "post": { "requestBody": {} } } } });
        assert!(matches!(read_webhooks(&bad), Err(ApiError::Validation(m)) if m.contains("no spaces")));
        assert!(matches!(read_webhooks(&json!({ "openapi": "3.1.0" })), Err(ApiError::Validation(_))));
    }
}
