//! Tidy tests: read the repository's files as text and hold the architecture to its invariants.
//!
//! Each test is one rule. They use only the standard library and look at text, not at
//! types, so they are approximate on purpose: a rule that bites a line wrongly is fixed by
//! rewording that line or by the exception list next to the rule, never by deleting the rule.
//! `TIDY_ROOT` points them at another checkout (a scratch copy to try a rule on).

mod kinds;
mod parents;
mod routes;
mod rows;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: `TIDY_ROOT` if set, else the parent of this crate (`tests/`).
fn root() -> PathBuf {
    // `option_env!` so the module also compiles under plain `rustc --test`.
    let root = match (std::env::var_os("TIDY_ROOT"), option_env!("CARGO_MANIFEST_DIR")) {
        (Some(r), _) => PathBuf::from(r),
        (None, Some(m)) => Path::new(m).parent().expect("tests/ lives in the repository root").to_path_buf(),
        (None, None) => panic!("outside cargo, set TIDY_ROOT to the repository root"),
    };
    fs::canonicalize(&root).unwrap_or(root)
}

/// Build output, dependencies and local data: not ours, and large.
const SKIP_DIRS: &[&str] = &["target", "node_modules", ".git", ".data"];

/// Every file under `rel` (a directory or a single file, relative to the root), as
/// (path relative to the root with `/` separators, absolute path), sorted for stable output.
fn files(rel: &str) -> Vec<(String, PathBuf)> {
    let root = root();
    let mut out = Vec::new();
    let mut stack = vec![root.join(rel)];
    while let Some(p) = stack.pop() {
        if p.is_file() {
            let r = p.strip_prefix(&root).unwrap_or(&p).to_string_lossy().replace('\\', "/");
            out.push((r, p));
            continue;
        }
        let Ok(entries) = fs::read_dir(&p) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if !(is_dir && SKIP_DIRS.iter().any(|s| name.to_str() == Some(s))) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The `.rs` files under `rel` with their text.
fn rust_files(rel: &str) -> Vec<(String, String)> {
    files(rel).into_iter().filter(|(r, _)| r.ends_with(".rs")).map(|(r, p)| (r, text(&p))).collect()
}

/// A file's text; lossy, because a rule about text must not stop at a stray byte.
fn text(p: &Path) -> String {
    String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned()
}

/// A Rust line without its `//` comment, whole-line or trailing: a comment about a call is
/// not a call. A `//` right after a non-space (as in `"http://"`) is not a comment.
fn rust_code(line: &str) -> &str {
    let cut = line.match_indices("//").find(|&(i, _)| i == 0 || line[..i].ends_with(char::is_whitespace));
    cut.map_or(line, |(i, _)| &line[..i])
}

/// The identifiers of a line (maximal runs of `[A-Za-z0-9_]`).
fn idents(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// Fails with the rule, every offending `file:line`, and how to fix them.
#[track_caller]
fn report(rule: &str, fix: &str, problems: &[String]) {
    assert!(problems.is_empty(), "\nRule: {rule}\n\n  {}\n\nFix: {fix}\n", problems.join("\n  "));
}

#[test]
fn only_the_store_runs_sql() {
    // Exact method names with their `(`: redis' `query_async(` is not SQL and does not match.
    const CALLS: &[&str] = &[
        ".query(",
        ".query_one(",
        ".query_opt(",
        ".execute(",
        ".batch_execute(",
        ".simple_query(",
        ".prepare(",
        ".copy_in(",
        ".query_raw(",
    ];
    let mut problems = Vec::new();
    for (file, src) in rust_files("crates") {
        // The bench sets up its own databases; migrations are the store's other half; the
        // Postgres destination writes a tenant's own database, never Hookgate's.
        if file.starts_with("crates/bench/")
            || file.starts_with("crates/shared/src/store/")
            || file == "crates/shared/src/migrate.rs"
            || file.starts_with("crates/egress/src/destinations/postgres/")
        {
            continue;
        }
        for (i, line) in src.lines().enumerate() {
            for call in CALLS.iter().filter(|c| rust_code(line).contains(*c)) {
                problems.push(format!("{file}:{}: `{call}` runs SQL outside the store", i + 1));
            }
        }
    }
    report(
        "all SQL lives in crates/shared/src/store/ (and the migration runner crates/shared/src/migrate.rs)",
        "move the statement into a function of a module in crates/shared/src/store/ that takes the \
         connection and then the tenant, and call that function instead.",
        &problems,
    );
}

#[test]
fn only_egress_makes_outbound_http_requests() {
    let mut problems = Vec::new();
    for (file, path) in files("crates") {
        // Egress owns outbound HTTP (behind the SSRF guard); the bench is a client by nature.
        if file.starts_with("crates/egress/") || file.starts_with("crates/bench/") {
            continue;
        }
        let code: fn(&str) -> &str = if file.ends_with("/Cargo.toml") {
            |l| l.split('#').next().unwrap_or_default()
        } else if file.ends_with(".rs") {
            rust_code
        } else {
            continue;
        };
        for (i, line) in text(&path).lines().enumerate() {
            // The trace exporter's own client, which posts only to the operator's
            // OTLP collector (`OTEL_EXPORTER_OTLP_ENDPOINT`), never to a tenant's URL.
            let otlp_client = file == "crates/gateway/Cargo.toml" && line.starts_with("opentelemetry-otlp ");
            if code(line).contains("reqwest") && !otlp_client {
                problems.push(format!("{file}:{}: names `reqwest`", i + 1));
            }
        }
    }
    report(
        "only crates/egress (and crates/bench) may use an HTTP client; requests to tenant URLs must \
         pass egress' SSRF guard",
        "remove the dependency and call into hookgate-egress for anything that goes out over HTTP.",
        &problems,
    );
}

/// Which workspace crates each crate may depend on (by directory under crates/, the
/// package being `hookgate-<dir>`). The arrows run one way: shared at the bottom, the
/// gateway binary on top; the bench measures everything and may use anything.
const ARROWS: &[(&str, &[&str])] = &[
    ("shared", &[]),
    ("egress", &["shared"]),
    ("ingress", &["egress", "shared"]),
    ("api", &["ingress", "egress", "shared"]),
    ("gateway", &["api", "ingress", "egress", "shared"]),
    // The bench shares the test harness (`tests/src`) for its servers and processes.
    ("bench", &["shared", "ingress", "egress", "api", "gateway", "tests"]),
];

#[test]
fn crate_dependencies_point_one_way() {
    let known: Vec<&str> = ARROWS.iter().map(|(c, _)| *c).chain(["tests"]).collect();
    let mut problems = Vec::new();
    let crates: Vec<String> = files("crates")
        .into_iter()
        .filter_map(|(f, _)| f.strip_suffix("/Cargo.toml")?.strip_prefix("crates/").map(str::to_owned))
        .filter(|c| !c.contains('/'))
        .collect();
    for krate in &crates {
        let Some((_, allowed)) = ARROWS.iter().find(|(c, _)| c == krate) else {
            problems.push(format!("crates/{krate}/Cargo.toml:1: crate `{krate}` has no entry in ARROWS"));
            continue;
        };
        let may_use = |dep: &str| dep == krate || allowed.contains(&dep);
        // Cargo.toml: `hookgate-*` keys of any [*dependencies] table, or [dependencies.hookgate-*].
        let manifest = format!("crates/{krate}/Cargo.toml");
        let mut in_deps = false;
        for (i, line) in text(&root().join(&manifest)).lines().enumerate() {
            let t = line.trim();
            let dep = if let Some(header) = t.strip_prefix('[') {
                let header = header.trim_end_matches(']');
                in_deps = header.ends_with("dependencies");
                header.rsplit_once("dependencies.").map(|(_, d)| d)
            } else if in_deps && !t.starts_with('#') {
                t.split_once('=').map(|(k, _)| k.trim().trim_matches('"'))
            } else {
                None
            };
            if let Some(dep) = dep.and_then(|d| d.strip_prefix("hookgate-")) {
                if !may_use(dep) {
                    problems.push(format!("{manifest}:{}: hookgate-{krate} depends on hookgate-{dep}", i + 1));
                }
            }
        }
        // Sources: naming `hookgate_<y>` is using it, even in a doc link.
        for (file, src) in rust_files(&format!("crates/{krate}")) {
            for (i, line) in src.lines().enumerate() {
                for dep in idents(line).filter_map(|w| w.strip_prefix("hookgate_")) {
                    if known.contains(&dep) && !may_use(dep) {
                        problems.push(format!("{file}:{}: hookgate-{krate} mentions hookgate_{dep}", i + 1));
                    }
                }
            }
        }
    }
    report(
        "crate arrows run one way: shared <- egress <- ingress <- api <- gateway (bench may use any)",
        "move the code to the lower crate, or pass a value or closure down instead of reaching up; \
         the allowed arrows are ARROWS in tests/tests/e2e/tidy.rs.",
        &problems,
    );
}

/// The store's exceptions to "the connection, then `tenant: &TenantId`", as
/// ("module::function" under crates/shared/src/store/, why it names no single tenant).
/// A stale entry (gone, renamed, or now tenant-first) fails the test too.
const EXCEPTIONS: &[(&str, &str)] = &[
    ("endpoint_kinds::admit", "the schema's list of endpoint kinds: no tenant's rows"),
    ("fanout::filter_passes", "runs a content filter on a payload the caller gives: reads no rows"),
    ("endpoint_kinds::admitted", "read: whether the schema admits a kind, no tenant's rows"),
    ("endpoint_kinds::newest", "read: the highest kind the schema admits, at a process's start"),
    ("endpoint_kinds::missing", "read: the kinds of this release the schema lacks, no tenant's rows"),
    ("queues::list", "the worker's slow sweep of endpoints with deliveries waiting, of every tenant"),
    ("queues::claim_all", "one transaction for a worker's claim: one statement per tenant (queues::claim) inside"),
    ("results::record", "one transaction for a batch of results: one statement per tenant and kind inside"),
    ("replay::step", "picks the running background task of the tenant served least lately; the step is that tenant's"),
    ("alert_outbox::claim", "the alert sender's claim of what is due, of every tenant: one sender serves them all"),
    (
        "alert_scans::failing",
        "the scan for endpoints failing long enough, of every tenant; each raised as its tenant's",
    ),
    (
        "alert_scans::stalled",
        "the scan for broker sources reading only errors, of every tenant; each raised as its tenant's",
    ),
    ("alerts::raise_notices", "a batch's notices (operational::emit's), each raised as its own tenant's"),
    ("alert_outbox::prune_marks", "forgets alert marks older than any window, of every tenant"),
    ("broker_sources::lease", "a worker takes and renews the broker sources it consumes, of every tenant"),
    ("broker_sources::prune_dead_letters", "forgets broker dead letters older than 30 days, of every tenant"),
    ("broadcast::pick", "picks the running broadcast stepped least lately, of any tenant; the step is that tenant's"),
    ("wakes::due", "the listing of endpoints whose wake has come, of every tenant: a worker serves them all"),
    ("pressure::report", "a worker's own pressure, no tenant's (admission control)"),
    ("inbound_events::keyed_at", "read: since when inbound keys are stored keyed, one row for the installation"),
    ("ingest_sources::cron_sources", "read: the cron sources of every tenant, which every ingress process ticks for"),
    ("pressure::read", "the workers' pressure, no tenant's (admission control)"),
    ("deliveries::quarantine", "the worker marks one claimed row failed; the outcome carries its tenant id"),
    ("deliveries::resume_enabled", "the worker's sweep resumes paused rows of every re-enabled tenant"),
    ("deliveries::pending_count", "the pending-deliveries gauge is one operator metric over all tenants"),
    ("usage::compact", "maintenance: past days' usage shards of every tenant are folded, sums kept"),
    ("usage::add", "the usage tallies of a process mix tenants; each count carries its tenant id"),
    ("usage::forget_flushes", "maintenance: the ids of usage batches a day old, which span tenants"),
    ("operational::emit", "notices of a batch of delivery results mix tenants; each notice carries its tenant id"),
    ("idempotency::claim", "keys are scoped by the credential's scope (a tenant id, or the operator's)"),
    ("idempotency::finish", "keys are scoped by the credential's scope (a tenant id, or the operator's)"),
    ("idempotency::release", "keys are scoped by the credential's scope (a tenant id, or the operator's)"),
    ("idempotency::prune", "maintenance: the pruner deletes expired keys of all tenants"),
    ("inbound_batch::admit_batches", "one commit for a group-commit batch: one statement per tenant inside"),
    ("inbound_batch::duplicates_batches", "one transaction for a batch's losers: one statement per tenant inside"),
    ("inbound_batch::take_over_async", "a loser of a group-commit batch; the row carries its tenant id"),
    ("retention::prune_inbound_keys", "maintenance: the pruner ends each source's dedupe window across all tenants"),
    ("retention::prune_inbound_events", "maintenance: the pruner applies each source's retention across all tenants"),
    ("retention::prune_messages", "maintenance: the pruner applies each tenant's retention across all tenants"),
    ("tasks::prune_ended", "maintenance: background tasks that ended past the message retention, of every tenant"),
    (
        "sinks::prune",
        "maintenance: the FIFO and polling endpoints' log past each tenant's message retention, of every tenant",
    ),
    ("sinks::horizon_age", "maintenance: the server's oldest open transaction, which holds every tenant's sinks back"),
    (
        "message_stream::horizon",
        "read: the server's oldest open transaction, which bounds every tenant's message stream",
    ),
    ("health::position", "read: a server's identity and WAL position, no tenant's (the replica check)"),
    ("health::answers", "an empty query: whether a connection still answers (the pool's check), no tenant's"),
    ("audit::prune", "maintenance: the audit log past each tenant's message retention, of every tenant"),
    ("fleet::backlog", "the operator's view of the fleet: the delivery backlog of every tenant"),
    ("fleet::workers", "the operator's view of the fleet: the delivery workers, no tenant's"),
    ("portal_tokens::prune", "maintenance: app-portal token revocations no live token can match, of every tenant"),
    (
        "fifo::pick",
        "a FIFO runner holds the endpoint of any tenant whose turn came longest ago; the turn is that tenant's",
    ),
    ("fifo::sweep", "the workers' slow sweep of FIFO progress rows left at rest with work waiting, of every tenant"),
    ("retention::expire_payloads", "maintenance: payloads past their own expiry, whatever their tenant"),
    ("retention::prune_request_keys", "maintenance: request keys past the Idempotency-Key's life, of all tenants"),
    ("retention::prune_event_ids_below", "maintenance: the eventIds of a dropped partition, which holds all tenants"),
    ("erasure::pending_erasures", "maintenance: the pruners finish the erasures every tenant requested"),
    ("erasure::erasures_pending", "the pending-erasures gauge is one operator metric over all tenants"),
    ("retention_stats::stats", "the retention gauges are operator metrics over all tenants"),
    ("partition_indexes::is_partitioned", "the migration runner's: a table of the schema, not a tenant's"),
    ("partition_indexes::build", "the migration runner's: an index of the schema, over every tenant's rows"),
    ("partitions::list", "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's"),
    ("partitions::ensure", "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's"),
    ("partitions::create", "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's"),
    ("partitions::detach", "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's"),
    ("partitions::detached_leftovers", "a partition holds the rows of every tenant; partitions are the schema's"),
    (
        "partitions::drop_table",
        "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's",
    ),
    ("partitions::horizons", "the longest retention any tenant or source has decides when a partition may go"),
    ("partitions::lock_for_attach", "the maintenance lock is one per database, not per tenant"),
    (
        "partitions::analyze_stale",
        "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's",
    ),
    ("partitions::lock_for_detach", "the maintenance lock is one per database, not per tenant"),
    ("partitions::unlock_session", "the maintenance lock is one per database, not per tenant"),
    ("partitions::now", "the database's clock, which no tenant owns"),
    ("partitions::reattach", "a partition holds the rows of every tenant; partitions are the schema's, not a tenant's"),
    ("partitions::statement_bound", "the maintenance connection's own bound, no tenant's"),
    ("partition_export::rows", "a partition's rows, of every tenant, for the archive before its drop"),
    ("partition_export::label", "a partition's bounds on its table, which holds every tenant's rows"),
    ("partition_export::labelled", "a partition's bounds on its table, which holds every tenant's rows"),
    ("publish_batch::publish_batches", "one commit for a group-commit batch: one statement per tenant inside"),
    ("endpoints::unsealed_headers", "the resealer of headers stored before sealing walks every tenant once at start"),
    ("sources::resolve", "/in/{source_id} names no tenant: the source id is all the provider's request carries"),
    ("tenants::find", "the operator names a tenant by id or uid in /admin/v1 paths: the tenant's own row, no owner"),
    ("tenants::list", "the operator lists all tenants; no tenant owns the list"),
];

/// The parameters of the fn whose name ends at byte `at` of `src`, as (name, type) with
/// whitespace collapsed; generics before the `(` are skipped, `->` is not a bracket.
fn params(src: &str, at: usize) -> Vec<(String, String)> {
    let b = src.as_bytes();
    let (mut depth, mut i) = (0i32, at);
    while i < b.len() && !(b[i] == b'(' && depth == 0) {
        match b[i] {
            b'<' => depth += 1,
            b'>' if b[i - 1] != b'-' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    let (mut out, mut start) = (Vec::new(), i + 1);
    for j in i + 1..b.len() {
        match b[j] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b'>' if b[j - 1] == b'-' => {}
            b')' | b']' | b'}' | b'>' if depth > 0 => depth -= 1,
            b',' | b')' if depth == 0 => {
                let p = src[start..j].split_whitespace().collect::<Vec<_>>().join(" ");
                if !p.is_empty() {
                    // The first `:` that is not half of a `::` separates pattern from type.
                    let colon = (0..p.len()).find(|&k| {
                        let pb = p.as_bytes();
                        pb[k] == b':' && pb.get(k + 1) != Some(&b':') && (k == 0 || pb[k - 1] != b':')
                    });
                    let (name, ty) = colon.map_or((p.as_str(), "Self"), |k| (&p[..k], &p[k + 1..]));
                    out.push((name.trim().trim_start_matches("mut ").to_owned(), ty.trim().to_owned()));
                }
                if b[j] == b')' {
                    break;
                }
                start = j + 1;
            }
            _ => {}
        }
    }
    out
}

#[test]
fn store_functions_take_the_tenant_first() {
    let store = "crates/shared/src/store/";
    // "module::fn" -> where it violates, if it does.
    let mut found: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (file, src) in rust_files(store) {
        let module = file[store.len()..].trim_end_matches(".rs");
        let module = if module == "mod" { "" } else { module.strip_suffix("/mod").unwrap_or(module) };
        let module = module.replace('/', "::");
        // Unit tests (conventionally last in a file) are not the store's API.
        let end = src.split_inclusive('\n').take_while(|l| l.trim() != "#[cfg(test)]").map(str::len).sum();
        let src = &src[..end];
        let mut offset = 0;
        for (i, line) in src.split_inclusive('\n').enumerate() {
            let t = line.trim_start();
            let decl = ["pub fn ", "pub async fn "].iter().find_map(|p| t.strip_prefix(p).map(|r| (p.len(), r)));
            if let Some((prefix, rest)) = decl {
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let ps = params(src, offset + (line.len() - t.len()) + prefix + name.len());
                let key = if module.is_empty() { name } else { format!("{module}::{name}") };
                let is_conn = |ty: &str| idents(ty).any(|w| ["GenericClient", "Client", "Transaction"].contains(&w));
                // Only functions that take a connection first are queries.
                if ps.first().is_some_and(|(_, ty)| is_conn(ty)) {
                    let second = ps.get(1).map(|(n, ty)| (n.as_str(), ty.replace(' ', "")));
                    let ok = matches!(&second, Some(("tenant", ty)) if ty == "&TenantId");
                    let here = format!("{file}:{}", i + 1);
                    let why = match ps.get(1) {
                        Some((n, ty)) => format!("{here}: `{key}` takes `{n}: {ty}` after the connection"),
                        None => format!("{here}: `{key}` takes nothing after the connection"),
                    };
                    let slot = found.entry(key).or_default();
                    if !ok && slot.is_none() {
                        *slot = Some(why);
                    }
                }
            }
            offset += line.len();
        }
    }
    // Point stale entries at their line in this file.
    let me = "tests/tests/e2e/tidy.rs";
    let own = text(&root().join(me));
    let line_of = |key: &str| own.lines().position(|l| l.contains(&format!("(\"{key}\","))).map_or(1, |i| i + 1);
    let mut problems = Vec::new();
    for (key, violation) in &found {
        if let (Some(v), false) = (violation, EXCEPTIONS.iter().any(|(k, _)| k == key)) {
            problems.push(format!("{v}, not `tenant: &TenantId`"));
        }
    }
    for (key, _) in EXCEPTIONS {
        match found.get(*key) {
            None => problems.push(format!(
                "{me}:{}: EXCEPTIONS names `{key}`, no `pub fn` of the store taking a connection: remove or rename it",
                line_of(key)
            )),
            Some(None) => problems.push(format!(
                "{me}:{}: EXCEPTIONS names `{key}`, which now takes the tenant first: remove it",
                line_of(key)
            )),
            Some(Some(_)) => {}
        }
    }
    report(
        "a store function taking a connection takes `tenant: &TenantId` right after it, so no query \
         can forget whose rows it reads",
        "make the second parameter `tenant: &TenantId` (and filter on it), or, if the function truly \
         spans or precedes tenants, add (\"module::fn\", \"why\") to EXCEPTIONS in tests/tests/e2e/tidy.rs.",
        &problems,
    );
}

/// The store functions that take no tenant (EXCEPTIONS) are exactly the ones
/// docs/operations.md lists under "Statements that span tenants": the list an
/// operator reads before distributing Postgres by tenant (Citus) stays the code's.
#[test]
fn the_statements_that_span_tenants_are_the_ones_listed() {
    let doc = text(&root().join("docs/operations.md"));
    let start = doc.find("### Statements that span tenants").expect("docs/operations.md has the section");
    let section = &doc[start + 4..];
    let section = &section[..section.find("\n### ").or_else(|| section.find("\n## ")).unwrap_or(section.len())];
    // The first cell of each row of the table.
    let listed: BTreeSet<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix('|').and_then(|l| l.split('|').next()))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .filter(|t| t.contains("::") && t.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == ':'))
        .collect();
    let excepted: BTreeSet<&str> = EXCEPTIONS.iter().map(|(k, _)| *k).collect();
    let mut problems = Vec::new();
    for k in excepted.difference(&listed) {
        problems.push(format!("tests/tests/e2e/tidy.rs: `{k}` spans tenants but docs/operations.md does not list it"));
    }
    for k in listed.difference(&excepted) {
        problems.push(format!("docs/operations.md: lists `{k}`, which is not an exception in tests/tests/e2e/tidy.rs"));
    }
    report(
        "docs/operations.md lists every store function that spans tenants, and only those",
        "add the function, with what it does across tenants, to the table under \"Statements that span \
         tenants\" in docs/operations.md (or remove a listed one that now takes its tenant).",
        &problems,
    );
}

#[test]
fn every_rust_file_says_what_it_is_for() {
    let mut problems = Vec::new();
    for (file, src) in rust_files("crates").into_iter().chain(rust_files("tests")) {
        if !src.starts_with("//!") {
            problems.push(format!("{file}:1: does not open with a `//!` line"));
        }
    }
    report(
        "every .rs file opens with a `//!` doc comment saying what it is for",
        "add a first line `//! <what this file is for>`.",
        &problems,
    );
}

#[test]
fn no_source_file_is_longer_than_500_lines_nor_a_test_file_than_700() {
    let mut problems = Vec::new();
    let sources = rust_files("crates").into_iter().map(|f| (f, 500));
    for ((file, src), max) in sources.chain(rust_files("tests").into_iter().map(|f| (f, 700))) {
        let n = src.lines().count();
        if n > max {
            problems.push(format!("{file}:{}: {n} lines, the most {max}", max + 1));
        }
    }
    report(
        "no .rs file under crates/ is longer than 500 lines, none under tests/ longer than 700",
        "split the file along a seam (a submodule per concern, tests in their own file).",
        &problems,
    );
}

/// Whether the relative path around `line[at..]` (an occurrence of `..` + `/shared`) resolves,
/// from `file`'s directory, to something that exists inside the repository. A crate's
/// `path = ` dependency on its sibling crates/shared does; the team's folder beside the checkout does not.
fn resolves_inside(root: &Path, file: &Path, line: &str, at: usize) -> bool {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
    let start = line[..at].trim_end_matches(path_char).len();
    let end = line.len() - line[at..].trim_start_matches(path_char).len();
    let mut p = file.parent().unwrap_or(root).to_path_buf();
    for part in line[start..end].split('/') {
        match part {
            "" | "." => {}
            ".." => {
                p.pop();
            }
            s => p.push(s),
        }
    }
    p.starts_with(root) && p.exists()
}

#[test]
fn the_repository_stands_alone() {
    // Migrations are left out on purpose: the runner checksums them, so they never change.
    const PLACES: &[&str] = &["README.md", "docs", "crates", "tests", "deploy", "scripts", "Makefile", ".ci"];
    // Built with concat! so this file does not contain what it forbids.
    let spec_file = concat!("SPEC", ".md");
    let spec_section = concat!("SPEC", " §");
    let outside = concat!("..", "/shared");
    let root = root();
    let mut problems = Vec::new();
    for place in PLACES {
        for (file, path) in files(place) {
            if file.starts_with("docs/") && !file.ends_with(".md") {
                continue;
            }
            for (i, line) in text(&path).lines().enumerate() {
                for needle in [spec_file, spec_section] {
                    if line.contains(needle) {
                        problems.push(format!("{file}:{}: refers to `{needle}`", i + 1));
                    }
                }
                for (at, _) in line.match_indices(outside) {
                    if !resolves_inside(&root, &path, line, at) {
                        problems.push(format!("{file}:{}: refers to `{outside}` outside the repository", i + 1));
                    }
                }
            }
        }
    }
    report(
        "the repository stands alone: nothing points at the team's spec or folders outside the checkout",
        "say what is meant in place, or link to the docs/ page that says it.",
        &problems,
    );
}

#[test]
fn the_web_ui_never_parses_data_as_markup() {
    // The UI's pages build every element with the DOM API (crates/api/ui/dom.js):
    // text goes in as text nodes and attribute values. These are the ways data
    // could become markup or code; none may appear, nor inline script or style
    // (the Content-Security-Policy would refuse them anyway).
    const JS: &[&str] = &[
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "setTimeout(\"",
        "createContextualFragment",
        "DOMParser",
        "srcdoc",
        "\"href\"",
        "href:",
    ];
    let mut problems = Vec::new();
    let ui = files("crates/api/ui");
    assert!(ui.iter().any(|(r, _)| r.ends_with("portal.js")), "the UI's files are where this test looks");
    for (rel, path) in ui {
        let src = text(&path);
        for (n, line) in src.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with('*') || code.starts_with("/*") {
                continue;
            }
            if rel.ends_with(".js") {
                for bad in JS.iter().filter(|b| code.contains(*b)) {
                    problems.push(format!("{rel}:{}: `{bad}`", n + 1));
                }
            }
            if rel.ends_with(".html") {
                let inline_script = code.contains("<script") && !code.contains(" src=");
                let inline_handler = code.split_whitespace().any(|w| w.starts_with("on") && w.contains('='));
                if inline_script || code.contains("style=") || inline_handler {
                    problems.push(format!("{rel}:{}: inline script or style", n + 1));
                }
            }
        }
    }
    report("the web UI builds pages with the DOM API only", "use h()/show() from dom.js", &problems);
}

/// actix tries route patterns in the order they are registered, each with a regular expression
/// (a few microseconds a try): the request that comes most, creating a message, is tried first, the
/// pages' patterns come after the API's scopes, and no middleware runs a regular expression over every
/// path (performance.md, "Routing without thirty regular expressions").
#[test]
fn the_hot_routes_are_tried_first() {
    let root = root();
    let mut problems = Vec::new();
    let v1 = text(&root.join("crates/api/src/v1/mod.rs"));
    let first = v1
        .split("pub fn configure(cfg: &mut ServiceConfig) {")
        .nth(1)
        .and_then(|body| body.lines().map(str::trim).find(|l| !l.is_empty()));
    if first != Some("message::configure(cfg);") {
        problems.push(format!("crates/api/src/v1/mod.rs: configure begins with {first:?}, not the message routes"));
    }
    let group = text(&root.join("crates/api/src/v1/message/mod.rs"));
    let first = group
        .split("pub fn configure(cfg: &mut ServiceConfig) {")
        .nth(1)
        .and_then(|body| body.lines().map(str::trim).find(|l| !l.is_empty()));
    if first != Some("crud::configure(cfg);") {
        problems.push(format!("crates/api/src/v1/message/mod.rs: configure begins with {first:?}, not `crud`"));
    }
    let messages = text(&root.join("crates/api/src/v1/message/crud.rs"));
    if !messages.contains("cfg.service(create)") {
        problems.push("crates/api/src/v1/message/crud.rs: the create route is not registered first".into());
    }
    let api = text(&root.join("crates/api/src/lib.rs"));
    match (api.find("scope(API)"), api.find("ui::configure(")) {
        (Some(scope), Some(pages)) if pages > scope => {}
        _ => problems.push("crates/api/src/lib.rs: the pages are registered before the /api/v1 scope".into()),
    }
    for (rel, src) in rust_files("crates") {
        if src.lines().any(|l| rust_code(l).contains("NormalizePath")) {
            problems.push(format!("{rel}: actix's NormalizePath runs a regular expression over every path"));
        }
    }
    report(
        "the hot routes are registered first and no middleware runs a regular expression over every path",
        "register the route where the rule says, or normalize with crates/gateway/src/paths.rs",
        &problems,
    );
}
