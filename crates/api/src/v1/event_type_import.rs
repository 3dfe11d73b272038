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
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::KeyAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(import);
}

/// Webhooks one document may hold.
const MOST_WEBHOOKS: usize = 1000;
/// How deep `$ref`s are followed when inlined; deeper (or circular) ones stay references.
const MOST_REF_DEPTH: usize = 16;
/// Values one document's schemas may expand to once inlined: references that
/// branch can grow exponentially with depth.
const MOST_INLINED: usize = 200_000;
/// How deeply an inlined schema may nest: stored as `jsonb`, it is read back by
/// a JSON parser that stops at 128 levels.
const MOST_NESTING: usize = 100;
/// Values a YAML `specRaw` may expand to: YAML aliases repeat what they name,
/// so a small text can stand for billions of values.
const MOST_YAML_VALUES: usize = 1_000_000;
/// Bytes of text (strings and keys) a YAML `specRaw` may expand to: an alias of a
/// long string repeats the whole string.
const MOST_YAML_BYTES: usize = 16 << 20;

/// The document to import: exactly one of `spec` (a JSON object) and `specRaw` (JSON or YAML text).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = EventTypeImportOpenApiIn)]
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
#[utoipa::path(tag = "Event Type", operation_id = "v1.event-type.import-openapi", responses((status = 200, body = ImportOut)))]
#[post("/event-type/import/openapi")]
async fn import(key: KeyAuth, state: web::Data<AppState>, body: web::Json<ImportIn>) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let spec = match (body.spec, body.spec_raw) {
        (Some(spec), None) => spec,
        (None, Some(raw)) => web::block(move || yaml::read(&raw))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
            .map_err(|e| ApiError::BadRequest(format!("`specRaw` is neither JSON nor YAML: {e}")))?,
        _ => return Err(ApiError::BadRequest("give exactly one of `spec` and `specRaw`".into())),
    };
    let found = read_webhooks(&spec)?;
    let names: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
    let mut conn = db::conn(&state.db).await?;
    if body.dry_run {
        let archived = match body.replace_all {
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
    let archived = match body.replace_all {
        true => event_types::archive_except(&*tx, &key.0, &names).await?,
        false => Vec::new(),
    };
    tx.commit().await.map_err(StoreError::from)?;
    tracing::info!(imported = names.len(), archived = archived.len(), "event types imported from OpenAPI");
    Ok(HttpResponse::Ok().json(ImportOut { data: Imported { modified: names, to_modify: None, archived } }))
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
    let mut budget = MOST_INLINED;
    for (name, item) in hooks {
        if !hookgate_shared::ids::is_uid(name) {
            return Err(bad(format!("webhook `{name}`: an event type name is 1 to 256 of a-z A-Z 0-9 - _ .")));
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
                let mut schema = inline(schema, components, (0, 0), &mut budget).ok_or_else(|| {
                    bad(format!(
                        "webhook `{name}`: its schema's `$ref`s expand to more than {MOST_INLINED} values, \
                         or nest deeper than {MOST_NESTING} levels, once inlined"
                    ))
                })?;
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

/// `schema` with its `#/components/schemas/…` references replaced by what they
/// name, to `MOST_REF_DEPTH` references deep (an event type's schema stands
/// alone); `None` once `budget` values have been made or the result would nest
/// deeper than `MOST_NESTING`. `(refs, nesting)`: how deep in each it is.
fn inline(
    schema: &Value,
    components: Option<&Map<String, Value>>,
    (refs, nesting): (usize, usize),
    budget: &mut usize,
) -> Option<Value> {
    *budget = budget.checked_sub(1)?;
    if nesting > MOST_NESTING {
        return None;
    }
    Some(match schema {
        Value::Object(o) => {
            let target = o.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"));
            if let (Some(name), Some(components)) = (target, components) {
                if let Some(found) = components.get(name).filter(|_| refs < MOST_REF_DEPTH) {
                    return inline(found, Some(components), (refs + 1, nesting), budget);
                }
            }
            let mut out = Map::with_capacity(o.len());
            for (k, v) in o {
                out.insert(k.clone(), inline(v, components, (refs, nesting + 1), budget)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            Value::Array(a.iter().map(|v| inline(v, components, (refs, nesting + 1), budget)).collect::<Option<_>>()?)
        }
        other => other.clone(),
    })
}

/// YAML (or JSON, which is YAML) read into a JSON value within a budget of
/// values: aliases are expanded as they are read, so a bomb stops at the budget
/// instead of filling memory.
mod yaml {
    use std::cell::Cell;
    use std::fmt;

    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    use super::{MOST_NESTING, MOST_YAML_BYTES, MOST_YAML_VALUES};

    pub(super) fn read(text: &str) -> Result<Value, serde_yaml_ng::Error> {
        let budget = Cell::new(MOST_YAML_VALUES);
        let bytes = Cell::new(MOST_YAML_BYTES);
        Bounded { budget: &budget, bytes: &bytes, depth: 0 }.deserialize(serde_yaml_ng::Deserializer::from_str(text))
    }

    #[derive(Clone, Copy)]
    struct Bounded<'a> {
        budget: &'a Cell<usize>,
        bytes: &'a Cell<usize>,
        depth: usize,
    }

    impl Bounded<'_> {
        fn take_text<E: de::Error>(&self, len: usize) -> Result<(), E> {
            match self.bytes.get().checked_sub(len) {
                Some(left) => {
                    self.bytes.set(left);
                    self.take()
                }
                None => Err(E::custom(format!("expands to more than {MOST_YAML_BYTES} bytes of text"))),
            }
        }

        fn take<E: de::Error>(&self) -> Result<(), E> {
            match self.budget.get().checked_sub(1) {
                Some(left) if self.depth <= MOST_NESTING => {
                    self.budget.set(left);
                    Ok(())
                }
                Some(_) => Err(E::custom(format!("nests deeper than {MOST_NESTING} levels"))),
                None => Err(E::custom(format!("expands to more than {MOST_YAML_VALUES} values"))),
            }
        }

        fn inner(&self) -> Self {
            Bounded { budget: self.budget, bytes: self.bytes, depth: self.depth + 1 }
        }
    }

    impl<'de> DeserializeSeed<'de> for Bounded<'_> {
        type Value = Value;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Bounded<'_> {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a YAML or JSON document")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
            self.take().map(|_| Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
            self.take().map(|_| Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
            self.take().map(|_| Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            self.take().map(|_| Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
            self.take_text(v.len()).map(|_| Value::String(v.to_owned()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            self.take().map(|_| Value::Null)
        }
        fn visit_none<E: de::Error>(self) -> Result<Value, E> {
            self.visit_unit()
        }
        fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            self.deserialize(d)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            self.take()?;
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(self.inner())? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            self.take()?;
            let mut out = Map::new();
            while let Some(k) = map.next_key_seed(self.inner())? {
                let key = match k {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, map.next_value_seed(self.inner())?);
            }
            Ok(Value::Object(out))
        }
    }
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
    fn a_yaml_alias_bomb_stops_at_the_budget_and_plain_yaml_reads() {
        let plain = yaml::read("webhooks:\n  a.b:\n    post: {summary: x}\n").unwrap();
        assert_eq!(plain["webhooks"]["a.b"]["post"]["summary"], "x");
        // Few aliases, each of a long list: under the parser's own repetition
        // limit, over the budget (1,500 x 1,000 values).
        let zeros = vec!["0"; 1000].join(", ");
        let aliases = vec!["*a"; 1500].join(", ");
        let bomb = format!("a: &a [{zeros}]\nb: [{aliases}]\n");
        let err = yaml::read(&bomb).unwrap_err().to_string();
        assert!(err.contains("expands to more than"), "{err}");
        // Few aliases of one long string: few values, but gigabytes of text.
        let long = "x".repeat(100_000);
        let aliases = vec!["*s"; 500].join(", ");
        let err = yaml::read(&format!("s: &s {long}\nb: [{aliases}]\n")).unwrap_err().to_string();
        assert!(err.contains("bytes of text"), "{err}");
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
