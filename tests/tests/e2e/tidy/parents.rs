//! The tidy rule that every statement writing into a hot table locks the parents it
//! writes under: what the foreign keys those tables no longer have held.

use super::{report, rust_files};

/// The tables whose foreign keys migration 0045 took away.
const HOT: [&str; 5] = ["messages", "deliveries", "attempts", "inbound_events", "inbound_keys"];

/// Functions that return a part of a statement (a CTE's text), not a statement:
/// the statements they are spliced into lock the parents. Each with who splices it.
const FRAGMENTS: [(&str, &str); 2] = [
    (
        "fanout.rs: insert_deliveries",
        "deliveries of the messages its caller's statement just inserted under locked apps",
    ),
    ("inbound_batch.rs: messages_of_admitted", "messages of events admit_batch and take_over_async wrote under locks"),
];

/// Functions that lock their parent in a CTE of their own rather than through
/// `store::parents`, each with where.
const INLINE: [(&str, &str); 1] =
    [("messages.rs: publish", "its `app` CTE, which resolves the application by id or uid, is `FOR KEY SHARE`")];

/// The store's functions, each as (file: name, its text up to the next function).
fn functions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, src) in rust_files("crates/shared/src/store") {
        let short = file.rsplit('/').next().unwrap_or(&file).to_owned();
        let mut current: Option<(String, String)> = None;
        for line in src.lines() {
            let t = line.trim_start();
            let rest = ["pub async fn ", "pub fn ", "pub(super) fn ", "pub(crate) fn ", "async fn ", "fn "]
                .iter()
                .find_map(|p| t.strip_prefix(p));
            if let Some(rest) = rest {
                out.extend(current.take());
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                current = Some((format!("{short}: {name}"), String::new()));
            }
            if let Some((_, body)) = current.as_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        out.extend(current);
    }
    out
}

/// Whether `body` inserts into one of the hot tables.
fn inserts_into_hot(body: &str) -> Option<&'static str> {
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    HOT.iter()
        .copied()
        .find(|t| flat.contains(&format!("INSERT INTO {t} (")) || flat.contains(&format!("INSERT INTO {t} AS")))
}

#[test]
fn every_insert_into_a_hot_table_locks_its_parents() {
    let mut problems = Vec::new();
    let found = functions();
    for (name, body) in &found {
        let Some(table) = inserts_into_hot(body) else { continue };
        // The lock made, and used (the CTE is defined in `parents.rs`, so its name here
        // is a read of it): a CTE no part of the statement reads is never run.
        let locks =
            body.contains("parents::lock_") && (body.contains("locked_apps") || body.contains("locked_sources"));
        let listed = FRAGMENTS.iter().chain(INLINE.iter()).any(|(f, _)| f == name);
        if !locks && !listed {
            problems
                .push(format!("crates/shared/src/store/{name}: inserts into `{table}` without locking its parents"));
        }
    }
    for (f, _) in INLINE {
        if !found.iter().any(|(name, body)| name == f && body.contains("FOR KEY SHARE")) {
            problems.push(format!("tests/tests/e2e/tidy/parents.rs: INLINE names `{f}`, which locks nothing"));
        }
    }
    for (f, _) in FRAGMENTS {
        if !found.iter().any(|(name, body)| name == f && inserts_into_hot(body).is_some()) {
            problems.push(format!(
                "tests/tests/e2e/tidy/parents.rs: FRAGMENTS names `{f}`, which inserts into no hot table"
            ));
        }
    }
    report(
        "a statement inserting into messages, deliveries, attempts, inbound_events or inbound_keys locks \
         the applications or sources it writes under (`store::parents`) and writes only under those it locked",
        "add `parents::lock_apps` (or `lock_sources`) as a CTE and join the inserted rows to `locked_apps`; \
         a function that only returns a CTE's text for such a statement goes in FRAGMENTS, with who splices it.",
        &problems,
    );
}
