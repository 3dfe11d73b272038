//! Expanding what a tenant sends (a YAML text's aliases, an OpenAPI document's
//! `$ref`s, a JSON body's values) within a budget of bytes, so that no request
//! can make the server hold much more than the budget.
//!
//! Both expansions repeat what they name: an alias or a reference costs a few
//! bytes of the request and clones a whole subtree; and even plain JSON grows
//! when parsed (`{"k":0}`, 7 bytes of text, is about 850 bytes of
//! `serde_json::Value`). A budget of values alone is not enough (one value can
//! be a string of 1 MB), so each value is charged what it holds in memory, as
//! `serde_json` lays it out (a `BTreeMap` per object), rounded up: the charge
//! bounds the memory from above (`the_charge_bounds_the_memory_of_what_is_made_from_above`
//! holds it against a counting allocator).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value};

/// One `serde_json::Value` (32 bytes), wherever it is held.
const VALUE: usize = 32;
/// What an allocation costs besides what it holds: the allocator's header and
/// rounding.
const HEAP: usize = 16;
/// An object's first `BTreeMap` node (632 bytes: eleven keys, eleven values).
const FIRST_NODE: usize = 640;
/// Each entry of an object, besides its key's text and its value: a share of a
/// node (at worst five entries a 632-byte leaf, and the inner nodes above).
const ENTRY: usize = 150;
/// Each element of an array, besides the value itself: the spare capacity a
/// vector that grew by doubling may hold.
const ELEMENT: usize = VALUE;
/// How deeply an expanded value may nest: stored as `jsonb`, it is read back by
/// a JSON parser that stops at 128 levels.
pub const MOST_NESTING: usize = 100;
/// How deep `$ref`s are followed when inlined; deeper (or circular) ones stay references.
pub const MOST_REF_DEPTH: usize = 16;

/// Bytes of memory an expansion may still make; shared by the threads of one
/// import (`hookgate import svix` charges every page it reads to one).
#[derive(Debug)]
pub struct Budget {
    left: AtomicUsize,
    most: usize,
}

/// An expansion that went past its budget or its nesting.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Overrun {
    #[error("expands to more than {} MiB in memory", .0 >> 20)]
    Bytes(usize),
    #[error("nests deeper than {MOST_NESTING} levels")]
    Nesting,
}

impl Budget {
    pub fn new(most: usize) -> Self {
        Budget { left: AtomicUsize::new(most), most }
    }

    fn take(&self, cost: usize) -> Result<(), Overrun> {
        match self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(cost)) {
            Ok(_) => Ok(()),
            Err(_) => Err(Overrun::Bytes(self.most)),
        }
    }

    /// A number, a boolean or null.
    pub fn scalar(&self) -> Result<(), Overrun> {
        self.take(VALUE)
    }

    /// A string of `len` bytes.
    pub fn string(&self, len: usize) -> Result<(), Overrun> {
        self.take(VALUE.saturating_add(HEAP).saturating_add(len))
    }

    /// An array, before its elements.
    pub fn array(&self) -> Result<(), Overrun> {
        self.take(VALUE + HEAP)
    }

    /// One element of an array, besides the element itself.
    pub fn element(&self) -> Result<(), Overrun> {
        self.take(ELEMENT)
    }

    /// An object, before its entries.
    pub fn object(&self) -> Result<(), Overrun> {
        self.take(VALUE + FIRST_NODE)
    }

    /// One entry of an object with a key of `len` bytes, besides its value.
    pub fn entry(&self, len: usize) -> Result<(), Overrun> {
        self.take(ENTRY.saturating_add(HEAP).saturating_add(len))
    }

    /// What has been charged so far.
    #[cfg(test)]
    pub fn spent(&self) -> usize {
        self.most - self.left.load(Ordering::Relaxed)
    }
}

/// A JSON text as a value, every value it makes charged to `budget`.
pub fn json(text: &[u8], budget: &Budget) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = yaml::Bounded::new(budget).deserialize(&mut de)?;
    de.end()?;
    Ok(value)
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
            budget.object()?;
            let mut out = Map::new();
            for (k, v) in o {
                budget.entry(k.len())?;
                out.insert(k.clone(), inline(v, components, (refs, nesting + 1), budget)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            budget.array()?;
            let mut out = Vec::with_capacity(a.len());
            for v in a {
                budget.element()?;
                out.push(inline(v, components, (refs, nesting + 1), budget)?);
            }
            Value::Array(out)
        }
        Value::String(s) => {
            budget.string(s.len())?;
            Value::String(s.clone())
        }
        other => {
            budget.scalar()?;
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
        Bounded::new(budget).deserialize(serde_yaml_ng::Deserializer::from_str(text))
    }

    /// A value read from any serde format, charged as it is made.
    #[derive(Clone, Copy)]
    pub(super) struct Bounded<'a> {
        budget: &'a Budget,
        depth: usize,
    }

    impl<'a> Bounded<'a> {
        pub(super) fn new(budget: &'a Budget) -> Self {
            Bounded { budget, depth: 0 }
        }

        fn take<E: de::Error>(&self, charged: Result<(), super::Overrun>) -> Result<(), E> {
            if self.depth > MOST_NESTING {
                return Err(E::custom(super::Overrun::Nesting));
            }
            charged.map_err(E::custom)
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
            self.take(self.budget.scalar()).map(|_| Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
            self.take(self.budget.scalar()).map(|_| Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
            self.take(self.budget.scalar()).map(|_| Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            self.take(self.budget.scalar()).map(|_| Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
            self.take(self.budget.string(v.len())).map(|_| Value::String(v.to_owned()))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
            self.take(self.budget.string(v.len())).map(|_| Value::String(v))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            self.take(self.budget.scalar()).map(|_| Value::Null)
        }
        fn visit_none<E: de::Error>(self) -> Result<Value, E> {
            self.visit_unit()
        }
        fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            self.deserialize(d)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            self.take(self.budget.array())?;
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(self.inner())? {
                self.take(self.budget.element())?;
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            self.take(self.budget.object())?;
            let mut out = Map::new();
            // A key is read as a value (YAML keys can be anything) and kept as
            // text: charged as a value while read, and as an entry once kept.
            while let Some(k) = map.next_key_seed(self.inner())? {
                let key = match k {
                    Value::String(s) => s,
                    // A list or a map as a key (YAML allows it, built from
                    // aliases as large as the budget) would be written out as
                    // text, escapes and all, past what was charged.
                    Value::Array(_) | Value::Object(_) => {
                        return Err(de::Error::custom("a key is a list or a map; keys are text"))
                    }
                    other => other.to_string(),
                };
                self.take(self.budget.entry(key.len()))?;
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
    use crate::counting::peak_of;

    #[test]
    fn the_charge_bounds_the_memory_of_what_is_made_from_above() {
        // Shapes that cost much more in memory than in text: many small
        // objects, wide objects, long and short strings, arrays that grow by
        // pushing (YAML, JSON) and by copying (references).
        let small = json!({ "list": (0..5_000).map(|i| json!({ "k": i })).collect::<Vec<_>>() });
        let wide = json!({ "props": (0..3_000).map(|i| (format!("p{i}"), json!(i))).collect::<Map<_, _>>() });
        let strings = json!((0..2_000).map(|i| "s".repeat(i % 300)).collect::<Vec<_>>());
        let components = json!({ "S": { "allOf": [{ "type": "object" }, { "enum": [1, 2, 3] }] } });
        let refs = json!({ "anyOf": vec![json!({ "$ref": "#/components/schemas/S" }); 3_000] });
        for shape in [&small, &wide, &strings, &refs] {
            let budget = Budget::new(usize::MAX);
            let (peak, made) = peak_of(|| inline(shape, components.as_object(), (0, 0), &budget).unwrap());
            assert!(peak <= budget.spent(), "inlining held {peak} bytes, charged {}", budget.spent());
            drop(made);
            let text = shape.to_string();
            let budget = Budget::new(usize::MAX);
            let (peak, made) = peak_of(|| json(text.as_bytes(), &budget).unwrap());
            assert!(peak <= budget.spent(), "JSON held {peak} bytes, charged {}", budget.spent());
            drop(made);
            let budget = Budget::new(usize::MAX);
            let (peak, made) = peak_of(|| yaml::read(&text, &budget).unwrap());
            // What is kept is charged; the YAML parser's own events, read
            // before the value is made, are bounded by the text (itself
            // bounded by the request body limit).
            let kept = peak_of(|| made.clone()).0;
            assert!(kept <= budget.spent(), "YAML kept {kept} bytes, charged {}", budget.spent());
            let events = 64 * text.len();
            assert!(peak <= budget.spent() + events, "YAML held {peak} bytes at its peak, charged {}", budget.spent());
        }
    }

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
    fn a_yaml_key_that_is_a_list_or_a_map_is_refused_and_a_number_key_reads_as_text() {
        let budget = Budget::new(1 << 20);
        let read = yaml::read("responses:\n  200: {description: ok}\n", &budget).unwrap();
        assert_eq!(read["responses"]["200"]["description"], "ok");
        let err = yaml::read("a: &a [\"\\u0001\\u0001\"]\n? *a\n: x\n", &budget).unwrap_err();
        assert!(err.to_string().contains("keys are text"), "{err}");
    }

    #[test]
    fn a_json_body_of_small_objects_is_charged_what_it_becomes_not_its_length() {
        // 7 bytes of text an object, about 850 in memory.
        let text = format!("[{}]", vec![r#"{"k":0}"#; 20_000].join(","));
        let err = json(text.as_bytes(), &Budget::new(4 << 20)).unwrap_err();
        assert!(err.to_string().contains("expands to more than 4 MiB"), "{err}");
        assert!(json(br#"{"a": [1, "two", null]}"#, &Budget::new(4 << 20)).is_ok());
    }
}
