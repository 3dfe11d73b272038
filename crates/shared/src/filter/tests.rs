//! The filter language: what it compiles to, and what it refuses (with where).

use super::*;

fn compiled(text: &str) -> String {
    Filter::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")).path
}

fn refused(text: &str) -> Invalid {
    Filter::parse(text).expect_err(text)
}

#[test]
fn comparisons_paths_and_logic_compile_to_a_jsonpath_predicate() {
    assert_eq!(compiled("amount > 100"), r#"$."amount" > 100"#);
    assert_eq!(compiled("$.amount >= 1.5e2"), r#"$."amount" >= 150.0"#);
    assert_eq!(compiled("status = 'paid'"), r#"$."status" == "paid""#);
    assert_eq!(compiled("order.items[0].sku != \"A\""), r#"$."order"."items"[0]."sku" != "A""#);
    assert_eq!(compiled("items[*].qty < -2"), r#"$."items"[*]."qty" < -2"#);
    assert_eq!(compiled("headers[\"content-type\"] == null"), r#"$."headers"."content-type" == null"#);
    assert_eq!(
        compiled("a == 1 and b == true or not c == false"),
        r#"$."a" == 1 && $."b" == true || !($."c" == false)"#
    );
    assert_eq!(compiled("a == 1 AND (b == 2 || c == 3)"), r#"$."a" == 1 && ($."b" == 2 || $."c" == 3)"#);
    assert_eq!(compiled("a in [1, 2] and b == 3"), r#"($."a" == 1 || $."a" == 2) && $."b" == 3"#);
    assert_eq!(compiled("currency in ['EUR', \"USD\"]"), r#"($."currency" == "EUR" || $."currency" == "USD")"#);
    assert_eq!(compiled("currency not in [1]"), r#"!($."currency" == 1)"#);
    assert_eq!(compiled("not exists(order.refund)"), r#"!(exists($."order"."refund"))"#);
    assert_eq!(compiled("exists == 1"), r#"$."exists" == 1"#, "a field may be called exists");
    assert_eq!(compiled("[\"a b\"].c == 1"), r#"$."a b"."c" == 1"#, "a first key that is no name");
    assert_eq!(compiled("$['in'] == 1"), r#"$."in" == 1"#);
}

#[test]
fn strings_are_quoted_so_no_text_escapes_its_literal() {
    assert_eq!(compiled(r#"name == "a\"b\\c""#), r#"$."name" == "a\"b\\c""#);
    assert_eq!(compiled("name == 'line\\nbreak'"), r#"$."name" == "line\u000abreak""#);
    assert_eq!(compiled(r#"name == "$.x) || true || ($.y""#), r#"$."name" == "$.x) || true || ($.y""#);
    assert_eq!(compiled("headers['a\"b'] == 1"), r#"$."headers"."a\"b" == 1"#);
}

#[test]
fn a_filter_that_is_wrong_is_refused_saying_what_and_where() {
    let e = refused("amount >");
    assert_eq!(e.at, 8);
    assert!(e.what.contains("expected a value"), "{e}");
    let e = refused("amount > 100 and");
    assert!(e.what.contains("expected a path"), "{e}");
    let e = refused("amount ~ 1");
    assert_eq!((e.at, e.what.as_str()), (7, "`~` is not part of a filter"));
    assert!(refused("(a == 1").what.contains("expected `)`"));
    assert!(refused("a == 1 b == 2").what.contains("expected `and`, `or` or the end"));
    assert!(refused("a == 'open").what.contains("not closed"));
    assert!(refused("a == 1x").what.contains("not a number"));
    assert!(refused("a == 1e999").what.contains("not a number"));
    assert!(refused("a in []").what.contains("expected a value"));
    assert!(refused("a not == 1").what.contains("expected `in`"));
    assert!(refused("a[-1] == 1").what.contains("expected an index"));
    assert!(refused("a == b").what.contains("expected a value"), "a path on the right is not a value");
    assert!(refused("and == 1").what.contains("expected a path"));
    assert!(refused("").what.contains("expected a path"));
}

#[test]
fn a_filter_stays_within_its_bounds() {
    assert!(refused(&"a == 1 or ".repeat(120)).what.contains("at most 1024 bytes"));
    let many = vec!["a == 1"; 33].join(" or ");
    assert!(refused(&many).what.contains("at most 32 comparisons"));
    assert!(Filter::parse(&vec!["a == 1"; 32].join(" or ")).is_ok());
    let deep = format!("{}a == 1{}", "(".repeat(17), ")".repeat(17));
    assert!(refused(&deep).what.contains("nests at most 16"));
    let nots = format!("{}a == 1", "not ".repeat(17));
    assert!(refused(&nots).what.contains("nests at most 16"));
    assert!(Filter::parse(&format!("{}a == 1{}", "(".repeat(16), ")".repeat(16))).is_ok());
    assert!(Filter::parse(&format!("{}a == 1", "not ".repeat(16))).is_ok());
    let lists = format!("a in [{}] or b in [{}]", vec!["1"; 20].join(","), vec!["2"; 13].join(","));
    assert!(refused(&lists).what.contains("each value of a list counts"), "33 comparisons");
    let list = format!("a in [{}]", vec!["1"; 65].join(","));
    assert!(refused(&list).what.contains("at most 64 values"));
    let long = vec!["a"; 17].join(".");
    assert!(refused(&format!("{long} == 1")).what.contains("at most 16 steps"));
}

proptest::proptest! {
    /// Any text at all: a filter or a refusal naming a place within the text,
    /// never a panic.
    #[test]
    fn any_text_is_a_filter_or_a_refusal_never_a_panic(text in "\\PC{0,80}") {
        if let Err(e) = Filter::parse(&text) {
            proptest::prop_assert!(e.at <= text.len().max(MAX_LEN));
        }
    }

}
