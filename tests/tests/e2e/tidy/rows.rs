//! The tidy rule that a row of more than one column is read by name: `r.get(23)`
//! read the wrong column silently once a select list grew by one in front of it;
//! `r.get("due_at")` reads the column of that name wherever it moves (a name
//! missing from the query panics in the first test that runs it).

use super::{report, rust_code, rust_files};

/// A `.get(N)` or `.try_get(N)` (with or without a turbofish) whose index is not
/// 0, or `.get(at + N)`: a read by position from a row that has a second column.
fn reads_by_position(code: &str) -> Option<String> {
    for call in [".get", ".try_get"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(call) {
            let start = at + i;
            at = start + call.len();
            let mut rest = &code[at..];
            if let Some(turbofish) = rest.strip_prefix("::<") {
                let Some(close) = turbofish.find('>') else { continue };
                rest = &turbofish[close + 1..];
            }
            let Some(arg) = rest.strip_prefix('(') else { continue };
            // `get(at + 3)`: an offset into the row is a position all the same.
            let arg = arg.trim_start();
            let offset = arg.split_once('+').filter(|(base, _)| {
                !base.is_empty() && base.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            let arg = offset.map_or(arg, |(_, n)| n).trim_start();
            let digits: String = arg.chars().take_while(char::is_ascii_digit).collect();
            let closes = arg[digits.len()..].trim_start().starts_with(')');
            if !digits.is_empty() && closes && digits.parse::<u32>().is_ok_and(|n| n > 0) {
                return Some(code[start..(at + 12).min(code.len())].trim().to_owned());
            }
        }
    }
    None
}

#[test]
fn a_row_of_several_columns_is_read_by_name_never_by_position() {
    let mut problems = Vec::new();
    for (file, src) in rust_files("crates") {
        // Only files that read rows; a file's own unit tests index vectors the same way.
        if !src.contains(".query") {
            continue;
        }
        let src = src.split("#[cfg(test)]").next().unwrap_or(&src);
        for (n, line) in src.lines().enumerate() {
            if let Some(found) = reads_by_position(rust_code(line)) {
                problems.push(format!("{file}:{}: `{found}`", n + 1));
            }
        }
    }
    report(
        "a row of more than one column is read by its columns' names",
        "read `r.get(\"column\")`, giving an expression its name with `AS` in the query (a one-column row may \
         keep `get(0)`)",
        &problems,
    );
}

#[test]
fn the_row_rule_catches_what_it_is_for_and_not_more() {
    for caught in ["r.get(1)", "row.get::<_, i64>(23)", "r.try_get( 2 )", "let x: i32 = r.get(10);", "r.get(at + 1)"] {
        assert!(reads_by_position(caught).is_some(), "{caught}");
    }
    for passed in ["r.get(0)", "r.get(\"due_at\")", "map.get(&key)", "v.get(i)", "headers.get(1..)"] {
        assert!(reads_by_position(passed).is_none(), "{passed}");
    }
}
