//! Expanding what a tenant sends (a YAML text's aliases, an OpenAPI document's
//! `$ref`s) within a budget of bytes, so that no request can make the server
//! hold much more than it sent.
//!
//! Both expansions repeat what they name: an alias or a reference costs a few
//! bytes of the request and clones a whole subtree. A budget of values alone
//! is not enough (one value can be a string of 1 MB), so each value is charged
//! what it costs in memory: [`VALUE_BYTES`] for the value, plus the bytes of its
//! text (a string, or a key of an object).

use std::cell::Cell;

use serde_json::{Map, Value};

/// What one `serde_json::Value` costs besides its text: the value itself, and
/// its slot in an array or a map. A little above the real figure (32 bytes a
/// value, ~16 a map entry), so the charge bounds the memory from above.
pub const VALUE_BYTES: usize = 48;
/// How deeply an expanded value may nest: stored as `jsonb`, it is read back by
/// a JSON parser that stops at 128 levels.
pub const MOST_NESTING: usize = 100;
/// How deep `$ref`s are followed when inlined; deeper (or circular) ones stay references.
pub const MOST_REF_DEPTH: usize = 16;

/// Bytes of memory an expansion may still make.
#[derive(Debug)]
pub struct Budget {
    left: Cell<usize>,
    most: usize,
}

/// An expansion that went past its budget or its nesting.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Overrun {
    #[error("expands to more than {0} bytes")]
    Bytes(usize),
    #[error("nests deeper than {MOST_NESTING} levels")]
    Nesting,
}

impl Budget {
    pub fn new(most: usize) -> Self {
        Budget { left: Cell::new(most), most }
    }

    /// Charges one value and `text` bytes of its text.
    pub fn charge(&self, text: usize) -> Result<(), Overrun> {
        let cost = VALUE_BYTES.saturating_add(text);
        match self.left.get().checked_sub(cost) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(Overrun::Bytes(self.most)),
        }
    }

    /// What has been charged so far.
    #[cfg(test)]
    pub fn spent(&self) -> usize {
        self.most - self.left.get()
    }
}

/// `schema` with its `#/components/schemas/…` references replaced by what they
/// name, to [`MOST_REF_DEPTH`] references deep (an event type's schema stands
/// alone), each value it makes charged to `budget`. `(refs, nesting)`: how deep
/// in each it is.
pub fn inline(
    schema: &Value,
    components: Option<&Map<String, Value>>,
    (refs, nesting): (usize, usize),
    budget: &Budget,
) -> Result<Value, Overrun> {
    if nesting > MOST_NESTING {
        return Err(Overrun::Nesting);
    }
    Ok(match schema {
        Value::Object(o) => {
            let target = o.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"));
            if let (Some(name), Some(components)) = (target, components) {
                if let Some(found) = components.get(name).filter(|_| refs < MOST_REF_DEPTH) {
                    return inline(found, Some(components), (refs + 1, nesting), budget);
                }
            }
            budget.charge(0)?;
            let mut out = Map::with_capacity(o.len());
            for (k, v) in o {
                // The key's text is charged with the value it names.
                let v = inline(v, components, (refs, nesting + 1), budget)?;
                budget.charge(k.len())?;
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            budget.charge(0)?;
            Value::Array(
                a.iter().map(|v| inline(v, components, (refs, nesting + 1), budget)).collect::<Result<_, _>>()?,
            )
        }
        Value::String(s) => {
            budget.charge(s.len())?;
            Value::String(s.clone())
        }
        other => {
            budget.charge(0)?;
            other.clone()
        }
    })
}

/// YAML (or JSON, which is YAML) read into a JSON value within a budget: aliases
/// are expanded as they are read, so a bomb stops at the budget instead of
/// filling memory.
pub mod yaml {
    use std::fmt;

    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    use super::{Budget, MOST_NESTING};

    /// `text` as a JSON value, every value it expands to charged to `budget`.
    pub fn read(text: &str, budget: &Budget) -> Result<Value, serde_yaml_ng::Error> {
        Bounded { budget, depth: 0 }.deserialize(serde_yaml_ng::Deserializer::from_str(text))
    }

    #[derive(Clone, Copy)]
    struct Bounded<'a> {
        budget: &'a Budget,
        depth: usize,
    }

    impl Bounded<'_> {
        fn take<E: de::Error>(&self, text: usize) -> Result<(), E> {
            if self.depth > MOST_NESTING {
                return Err(E::custom(super::Overrun::Nesting));
            }
            self.budget.charge(text).map_err(E::custom)
        }

        fn inner(&self) -> Self {
            Bounded { budget: self.budget, depth: self.depth + 1 }
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
            self.take(0).map(|_| Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
            self.take(0).map(|_| Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
            self.take(0).map(|_| Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            self.take(0).map(|_| Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
            self.take(v.len()).map(|_| Value::String(v.to_owned()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            self.take(0).map(|_| Value::Null)
        }
        fn visit_none<E: de::Error>(self) -> Result<Value, E> {
            self.visit_unit()
        }
        fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            self.deserialize(d)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            self.take(0)?;
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(self.inner())? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            self.take(0)?;
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
    use serde_json::json;

    use super::*;

    #[test]
    fn a_yaml_alias_bomb_stops_at_the_budget_and_plain_yaml_reads() {
        let budget = Budget::new(1 << 20);
        let plain = yaml::read("webhooks:\n  a.b:\n    post: {summary: x}\n", &budget).unwrap();
        assert_eq!(plain["webhooks"]["a.b"]["post"]["summary"], "x");
        // Few aliases, each of a long list: under the parser's own repetition
        // limit, over the budget (1,500 x 1,000 values).
        let zeros = vec!["0"; 1000].join(", ");
        let aliases = vec!["*a"; 1500].join(", ");
        let bomb = format!("a: &a [{zeros}]\nb: [{aliases}]\n");
        let err = yaml::read(&bomb, &Budget::new(16 << 20)).unwrap_err().to_string();
        assert!(err.contains("expands to more than"), "{err}");
        // Few aliases of one long string: few values, but gigabytes of text.
        let long = "x".repeat(100_000);
        let aliases = vec!["*s"; 500].join(", ");
        let err = yaml::read(&format!("s: &s {long}\nb: [{aliases}]\n"), &Budget::new(16 << 20)).unwrap_err();
        assert!(err.to_string().contains("expands to more than"), "{err}");
    }

    #[test]
    fn a_reference_to_a_long_string_is_charged_its_bytes_each_time_it_is_copied() {
        // One value a copy, but 100 KB of text: 200 copies are 20 MB.
        let components = json!({ "Big": { "description": "x".repeat(100_000) } });
        let components = components.as_object();
        let refs: Vec<Value> = (0..200).map(|_| json!({ "$ref": "#/components/schemas/Big" })).collect();
        let schema = json!({ "allOf": refs });
        let budget = Budget::new(4 << 20);
        assert_eq!(inline(&schema, components, (0, 0), &budget), Err(Overrun::Bytes(4 << 20)));
        // Ten copies fit, and are charged at least their text.
        let schema = json!({ "allOf": refs[..10] });
        let budget = Budget::new(4 << 20);
        let out = inline(&schema, components, (0, 0), &budget).unwrap();
        assert_eq!(out["allOf"][9]["description"].as_str().map(str::len), Some(100_000));
        assert!(budget.spent() >= 1_000_000, "{}", budget.spent());
    }

    #[test]
    fn the_charge_bounds_the_memory_of_what_is_made_from_above() {
        // Many small values: the charge is at least what serde_json holds them in.
        let schema = json!({ "enum": (0..10_000).map(|i| json!({ format!("k{i}"): i })).collect::<Vec<_>>() });
        let budget = Budget::new(usize::MAX);
        inline(&schema, None, (0, 0), &budget).unwrap();
        let held = 10_000 * (std::mem::size_of::<Value>() * 2 + 6);
        assert!(budget.spent() >= held, "charged {} for at least {held}", budget.spent());
    }
}
