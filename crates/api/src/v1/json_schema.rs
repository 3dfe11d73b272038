//! An event type's `schemas` checked as JSON Schemas (draft 7 unless a schema
//! names its own `$schema`), as Svix checks them: a schema that is not one is 422.

use boon::{Compiler, Draft, Schemas, UrlLoader};
use hookgate_shared::http::ApiError;
use serde_json::Value;

/// Refuses every URL a schema's `$ref` names: tenant input must not make the
/// server read a file or open a connection. The standard metaschemas are built
/// into the crate and never reach a loader.
struct NoLoader;

impl UrlLoader for NoLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("`{url}` is not loaded: a schema may refer only within itself").into())
    }
}

/// Checks `schemas` (`{"<version>": <schema>, …}`): an object whose every value
/// compiles as a JSON Schema.
pub fn check(schemas: &Value) -> Result<(), ApiError> {
    let Some(versions) = schemas.as_object() else {
        return Err(ApiError::Validation("`schemas` must be an object of versions to JSON Schemas".into()));
    };
    for (version, schema) in versions {
        compile(schema).map_err(|e| ApiError::Validation(format!("`schemas.{version}` is not a JSON Schema: {e}")))?;
    }
    Ok(())
}

fn compile(schema: &Value) -> Result<(), String> {
    // A boolean is a schema too (draft 6 on), but Svix's schemas are objects.
    if !schema.is_object() {
        return Err("a schema must be an object".into());
    }
    const AT: &str = "urn:hookgate:event-type-schema";
    let mut compiler = Compiler::new();
    compiler.set_default_draft(Draft::V7);
    compiler.use_loader(Box::new(NoLoader));
    compiler.add_resource(AT, schema.clone()).map_err(|e| e.to_string())?;
    compiler.compile(AT, &mut Schemas::new()).map(|_| ()).map_err(|e| match e {
        // Its own words name only the URL; say why it was not followed.
        boon::CompileError::LoadUrlError { url, .. } => {
            format!("`$ref` to `{}` is not loaded: a schema may refer only within itself", shorten(&url))
        }
        e => shorten(&e.to_string()),
    })
}

/// An error as told back: at most 300 characters of it.
fn shorten(s: &str) -> String {
    s.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    #[test]
    fn a_schema_that_breaks_its_metaschema_is_refused_and_a_good_one_passes() {
        assert!(check(&json!({"1": {"readOnly": 15}})).is_err(), "readOnly must be a boolean in draft 7");
        assert!(check(&json!({"1": {"type": "nonsense"}})).is_err());
        assert!(check(&json!({"1": 5})).is_err());
        assert!(check(&json!([])).is_err());
        let good = json!({"1": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}});
        assert!(check(&good).is_ok());
        assert!(check(&json!({})).is_ok());
    }

    #[test]
    fn a_schema_referring_outside_itself_is_refused_without_reading_anything() {
        let err = check(&json!({"1": {"$ref": "file:///etc/passwd"}})).unwrap_err().to_string();
        assert!(err.contains("not loaded"), "{err}");
        let http = check(&json!({"1": {"$ref": "http://127.0.0.1:9/schema.json"}})).unwrap_err().to_string();
        assert!(http.contains("not loaded"), "{http}");
        let inner = json!({"1": {"definitions": {"a": {"type": "string"}}, "$ref": "#/definitions/a"}});
        assert!(check(&inner).is_ok());
    }
}
