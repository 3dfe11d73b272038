//! An event type's `schemas` checked as JSON Schemas (draft 7 unless a schema
//! names its own `$schema`), as Svix checks them: a schema that is not one is 422.
//!
//! Compiling a schema compiles its regular expressions, whose cost a tenant
//! chooses: the schemas are bounded first ([`bounded`]), each pattern compiled
//! here within a small automaton budget, so that the compiler never meets one
//! that could take seconds or megabytes.

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
    bounded(schemas).map_err(|e| ApiError::Validation(format!("`schemas`: {e}")))?;
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

/// The most an event type's schemas may hold: values in all, regular expressions
/// (`pattern`s and `patternProperties` keys), and bytes in one expression; and
/// the automaton one expression may compile to.
const MOST_VALUES: usize = 20_000;
const MOST_PATTERNS: usize = 64;
const MOST_PATTERN_BYTES: usize = 512;
const PATTERN_BUDGET: usize = 64 << 10;

/// Refuses schemas beyond the bounds above, before any is compiled: a schema of
/// thousands of `\d` costs the compiler time growing with their square, and one
/// `\p{L}{1000}` megabytes.
fn bounded(schemas: &Value) -> Result<(), String> {
    let (mut values, mut patterns) = (0usize, Vec::new());
    let mut stack = vec![schemas];
    while let Some(v) = stack.pop() {
        values += 1;
        if values > MOST_VALUES {
            return Err(format!("more than {MOST_VALUES} values"));
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, child) in map {
                    match (k.as_str(), child) {
                        ("pattern", Value::String(p)) => patterns.push(p.as_str()),
                        ("patternProperties", Value::Object(props)) => {
                            patterns.extend(props.keys().map(String::as_str))
                        }
                        _ => {}
                    }
                    stack.push(child);
                }
            }
            _ => {}
        }
    }
    if patterns.len() > MOST_PATTERNS {
        return Err(format!("more than {MOST_PATTERNS} regular expressions"));
    }
    for p in patterns {
        if p.len() > MOST_PATTERN_BYTES {
            return Err(format!("a regular expression is longer than {MOST_PATTERN_BYTES} bytes"));
        }
        // Compiled as the schema compiler will (ECMA's ASCII classes), within a
        // budget. Anything this refuses is refused: a pattern only the schema
        // compiler would repair (ECMA's `\cX`) must not reach it unmeasured.
        let ascii = ascii_classes(p);
        let built = regex::RegexBuilder::new(&ascii).size_limit(PATTERN_BUDGET).dfa_size_limit(PATTERN_BUDGET).build();
        match built {
            Ok(_) => {}
            Err(regex::Error::CompiledTooBig(_)) => {
                return Err(format!("the regular expression `{}` is too large", shorten(p)))
            }
            Err(_) => return Err(format!("`{}` is no regular expression Hookgate can compile", shorten(p))),
        }
    }
    Ok(())
}

/// ECMA 262's `\d`, `\w` (and their negations) match ASCII only, where this
/// crate's are Unicode (one `\w` compiles to some 45 KB): rewritten to ASCII
/// classes, as the schema compiler rewrites them. `\D` and `\W` inside a class
/// stay (larger, so measured on the safe side).
fn ascii_classes(p: &str) -> String {
    let (mut out, mut in_class, mut chars) = (String::with_capacity(p.len() + 16), false, p.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('d' | 'w' | 'D' | 'W')) => {
                    let class = if matches!(e, 'd' | 'D') { "0-9" } else { "a-zA-Z0-9_" };
                    match (in_class, e.is_ascii_lowercase()) {
                        (true, true) => out.push_str(class),
                        (true, false) => {
                            out.push('\\');
                            out.push(e);
                        }
                        (false, true) => out.push_str(&format!("[{class}]")),
                        (false, false) => out.push_str(&format!("[^{class}]")),
                    }
                }
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
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
    fn schemas_whose_expressions_would_cost_seconds_or_megabytes_are_refused_before_compiling() {
        let many_classes = "\\d".repeat(300);
        assert!(check(&json!({"1": {"type": "string", "pattern": many_classes}})).is_err(), "longer than allowed");
        let huge = json!({"1": {"type": "string", "pattern": "\\p{L}{1000}"}});
        let err = check(&huge).unwrap_err().to_string();
        assert!(err.contains("too large"), "{err}");
        let props: serde_json::Map<_, _> = (0..65).map(|i| (format!("p{i}"), json!({"pattern": "a"}))).collect();
        assert!(check(&json!({"1": {"type": "object", "properties": props}})).is_err(), "more than 64 patterns");
        let keys: serde_json::Map<_, _> = (0..65).map(|i| (format!("^k{i}$"), json!({}))).collect();
        assert!(check(&json!({"1": {"patternProperties": keys}})).is_err());
        let wide: Vec<_> = (0..20_001).collect();
        assert!(check(&json!({"1": {"examples": wide}})).is_err(), "more than 20000 values");
        assert!(check(&json!({"1": {"type": "string", "pattern": "^[a-z]{1,32}\\d*$"}})).is_ok());
        // ECMA's `\c` is repaired only by the schema compiler: refused, not let through unmeasured.
        assert!(check(&json!({"1": {"type": "string", "pattern": "\\cA|\\p{L}{1000}"}})).is_err());
    }

    #[test]
    fn ecma_word_and_digit_classes_are_measured_as_the_ascii_classes_they_are() {
        for ok in ["^[\\w.-]+@[\\w-]+\\.\\w+$", "^\\w+\\.\\w+$", "\\d{4}-\\d{2}", "[^\\s]+", "\\\\w"] {
            assert!(check(&json!({"1": {"type": "string", "pattern": ok}})).is_ok(), "{ok}");
        }
        assert_eq!(super::ascii_classes("a\\d[\\w-]\\W\\\\d"), "a[0-9][a-zA-Z0-9_-][^a-zA-Z0-9_]\\\\d");
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
