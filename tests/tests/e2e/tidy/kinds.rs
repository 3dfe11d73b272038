//! The tidy rule that SQL names a kind by its set (`EndpointKind::sql_set`, a
//! `TaskKind`'s code as a parameter), never by comparing its number: `kind >= 7`
//! once meant "FIFO or polling endpoint", and a ninth kind would have been taken
//! for one of them without a word.

use super::{report, rust_code, rust_files};

/// A `kind` column compared with a number literal: `kind >= 7`, `e.kind = 0`,
/// `kind <> 6`, `kind IN (7, 8)`.
fn compares_a_kind_number(code: &str) -> Option<String> {
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(i) = code[at..].find("kind") {
        let start = at + i;
        at = start + 4;
        // The whole word `kind` (or `x.kind`), not `relkind` or `kinds`.
        let before = start.checked_sub(1).map(|b| bytes[b]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            || bytes.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            continue;
        }
        let rest = code[at..].trim_start();
        let rest = ["NOT IN", "IN", ">=", "<=", "<>", "!=", "=", "<", ">"]
            .iter()
            .find_map(|op| rest.strip_prefix(op))
            .map(|r| r.trim_start().trim_start_matches('(').trim_start());
        if rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) {
            return Some(code[start..(start + 24).min(code.len())].to_owned());
        }
    }
    None
}

#[test]
fn sql_names_a_kind_by_its_set_never_by_its_number() {
    let mut problems = Vec::new();
    for (file, src) in rust_files("crates") {
        // Rust's own `kind == …` compares enums, and is not matched (`==`).
        for (n, line) in src.lines().enumerate() {
            let code = rust_code(line);
            let code = code.split(" -- ").next().unwrap_or(code);
            if let Some(found) = compares_a_kind_number(code) {
                problems.push(format!("{file}:{}: `{found}`", n + 1));
            }
        }
    }
    report(
        "SQL compares no kind column with a number",
        "name the kinds by their set: `EndpointKind::sql_set(…)` spliced into the text, or the enum's `code()` \
         as a parameter",
        &problems,
    );
}

#[test]
fn the_kind_rule_catches_what_it_is_for_and_not_more() {
    for caught in ["AND e.kind >= 7", "kind = 0 AND", "t.kind <> 6", "e.kind IN (7, 8)", "kind<7"] {
        assert!(compares_a_kind_number(caught).is_some(), "{caught}");
    }
    for passed in ["c.relkind = 'r'", "kind = $4", "e.kind IN {sinks}", "kinds = 3", "kind NOT IN {http}", "kind == 7"]
    {
        assert!(compares_a_kind_number(passed).is_none(), "{passed}");
    }
}
