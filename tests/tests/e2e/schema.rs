//! Citus-ready, checked on the catalog: every primary key and unique constraint
//! (or unique index) of every table holds the tenant id, and every foreign key
//! between tenant tables carries it on both sides, so each table can be
//! distributed by `tenant_id` (docs/operations.md shows the calls). The
//! exceptions are listed here with their reasons.

use std::collections::BTreeMap;

use hookgate_tests::TestDb;

/// Tables that are not distributed by `tenant_id`, and why.
const NOT_DISTRIBUTED: &[(&str, &str)] = &[
    ("tenants", "a reference table (small, copied to every node); its key is the tenant id itself and `uid` is unique across tenants"),
    ("hookgate_migrations", "Hookgate's own bookkeeping, on the coordinator only"),
    ("hookgate_partition_cutover", "one row: where the tables from before partitioning end; on the coordinator only"),
    ("delivery_pressure", "the delivery workers' own state (how far behind each is), unlogged; on the coordinator only"),
    ("usage_flushes", "the ids of a process's usage-tally batches, which span tenants: a reference table"),
    ("inbound_key_form", "one row: since when inbound keys are stored keyed; a reference table"),
    ("endpoint_kinds", "the kinds an endpoint row may be of, written by `hookgate migrate`: a reference table"),
];

#[tokio::test]
async fn every_key_and_unique_index_of_a_distributed_table_holds_the_tenant_id() {
    let db = TestDb::new().await;
    let client = db.client().await;
    let tables: Vec<String> = client
        .query(
            "SELECT relname::text FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 10, "the schema is there: {tables:?}");
    // Every unique index, whether it backs a primary key, a unique constraint or stands
    // alone; its key columns only (not INCLUDE ones), an expression as `(expression)`.
    let rows = client
        .query(
            "SELECT t.relname::text, i.relname::text,
                    array(SELECT COALESCE(a.attname::text, '(expression)')
                          FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
                          LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
                          WHERE k.n <= x.indnkeyatts ORDER BY k.n),
                    x.indisprimary
             FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
             WHERE x.indisunique AND t.relnamespace = 'public'::regnamespace",
            &[],
        )
        .await
        .unwrap();
    let mut problems = Vec::new();
    let mut keyed: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        let (table, index, cols, primary): (String, String, Vec<String>, bool) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        if NOT_DISTRIBUTED.iter().any(|(t, _)| *t == table) {
            continue;
        }
        if primary {
            *keyed.entry(table.clone()).or_default() += 1;
        }
        if !cols.iter().any(|c| c == "tenant_id") {
            problems.push(format!("{table}: unique index {index} on {cols:?} lacks tenant_id"));
        }
    }
    for t in &tables {
        let listed = NOT_DISTRIBUTED.iter().any(|(n, _)| n == t);
        if !listed && !keyed.contains_key(t) {
            problems.push(format!("{t}: no primary key"));
        }
    }
    // Foreign keys between distributed tables must join on the tenant id too.
    let fks = client
        .query(
            "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text, c.conname::text,
                    array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n),
                    array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
                          JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n)
             FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace",
            &[],
        )
        .await
        .unwrap();
    for r in &fks {
        let (from, to, name, cols, refs): (String, String, String, Vec<String>, Vec<String>) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        if NOT_DISTRIBUTED.iter().any(|(t, _)| *t == to) {
            continue; // to a reference table: allowed from any node
        }
        let pos = cols.iter().position(|c| c == "tenant_id");
        if pos.is_none() || pos.map(|p| refs[p].as_str()) != Some("tenant_id") {
            problems
                .push(format!("{from}: foreign key {name} to {to} does not join on tenant_id ({cols:?} -> {refs:?})"));
        }
    }
    // Exclusion constraints cannot be checked per shard either: Hookgate has none.
    let exclusions = client
        .query(
            "SELECT conname::text FROM pg_constraint WHERE contype = 'x' AND connamespace = 'public'::regnamespace",
            &[],
        )
        .await
        .unwrap();
    for r in &exclusions {
        problems.push(format!("exclusion constraint {}: not distributable", r.get::<_, String>(0)));
    }
    assert!(problems.is_empty(), "not distributable by tenant_id:\n{}", problems.join("\n"));
    for (t, _) in NOT_DISTRIBUTED {
        assert!(tables.iter().any(|x| x == t), "NOT_DISTRIBUTED names `{t}`, which is no table: remove it");
    }
}

/// The kinds an endpoint may be of are rows written from the kinds table, not a
/// range in a CHECK: a release with a new kind needs no migration of its own
/// (its admission on a database in use: `contract::a_new_endpoint_kind_…`), and
/// the schema still refuses a kind no release knows.
#[tokio::test]
async fn the_schema_admits_the_kinds_of_the_kinds_table_and_refuses_any_other() {
    use hookgate_shared::{
        migrate::{self, Switch},
        status::EndpointKind,
    };
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run(&mut client, Switch::Apply).await.unwrap();
    let codes = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| r.get::<_, i16>(0)).collect::<Vec<_>>();
    let table: Vec<i16> = EndpointKind::ALL.iter().map(|k| k.code()).collect();
    let stored = codes(client.query("SELECT code FROM endpoint_kinds ORDER BY code", &[]).await.unwrap());
    assert_eq!(stored, table);
    client
        .batch_execute(
            "INSERT INTO tenants (id, name) VALUES ('tnt_a', 'a');
             INSERT INTO applications (tenant_id, id, name) VALUES ('tnt_a', 'app_a', 'a');",
        )
        .await
        .unwrap();
    let insert = |kind: i16| {
        let client = &client;
        async move {
            client
                .execute(
                    "INSERT INTO endpoints (tenant_id, app_id, id, url, secret, kind, destination)
                     VALUES ('tnt_a', 'app_a', $2, 'http://127.0.0.1:9/', '\\x00', $1, '\\x00')",
                    &[&kind, &format!("ep_{kind}")],
                )
                .await
        }
    };
    insert(EndpointKind::Sqs.code()).await.expect("a kind of the table is admitted");
    let refused = insert(99).await.expect_err("a kind no release knows is refused");
    let refused = refused.as_db_error().map(|e| e.constraint().unwrap_or_default().to_owned());
    assert_eq!(refused.as_deref(), Some("endpoints_kind_is_a_kind"));
}
