//! An index on a partitioned table built by the migration runner partition by
//! partition (0044): each partition's own, attached, the parent's valid; what a
//! failed build left is built again; a partition made afterwards has it too; and
//! the endpoint's deliveries are read through it once the wide one is gone.

use chrono::{Duration, Utc};
use hookgate_shared::{
    migrate::{self, Contracts, Switch, MIGRATIONS},
    store::{partition_indexes, partitions},
};
use hookgate_tests::TestDb;
use tokio_postgres::Client;

/// Each partition of `table` with the name of the index of it attached to
/// `index` (`None` where it has none) and whether that one is valid.
async fn attached(db: &Client, table: &str, index: &str) -> Vec<(String, Option<String>, Option<bool>)> {
    db.query(
        "SELECT c.relname::text, ci.relname::text, x.indisvalid
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         LEFT JOIN (pg_index x JOIN pg_inherits ii ON ii.inhrelid = x.indexrelid AND ii.inhparent = $2::text::regclass
                    JOIN pg_class ci ON ci.oid = x.indexrelid) ON x.indrelid = c.oid
         WHERE i.inhparent = $1::text::regclass ORDER BY 1",
        &[&table, &index],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

async fn valid(db: &Client, index: &str) -> Option<bool> {
    db.query_opt("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", &[&index])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

#[tokio::test]
async fn an_index_on_a_partitioned_table_is_built_on_every_partition_and_a_failed_builds_leftover_built_again() {
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0043"), Switch::Apply).await.unwrap();
    assert!(partition_indexes::is_partitioned(&client, "deliveries").await.unwrap());
    assert!(!partition_indexes::is_partitioned(&client, "inbound_keys").await.unwrap(), "built the usual way");
    let parts = attached(&client, "deliveries", "deliveries_endpoint").await;
    assert!(parts.len() >= 3, "partitions are there to build on: {parts:?}");
    // A build that died midway: one partition's index left behind invalid.
    let broken = format!("{}_by_endpoint", parts[1].0);
    client
        .batch_execute(&format!(
            "CREATE INDEX {broken} ON {} (endpoint_id);
             UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{broken}'::regclass",
            parts[1].0
        ))
        .await
        .unwrap();
    assert_eq!(valid(&client, "deliveries_by_endpoint").await, None, "not built yet");

    migrate::run_list(&mut client, MIGRATIONS, None, Switch::Apply, Contracts::Apply).await.unwrap();
    assert_eq!(valid(&client, "deliveries_by_endpoint").await, Some(true));
    for (partition, index, ok) in attached(&client, "deliveries", "deliveries_by_endpoint").await {
        assert_eq!(index.as_deref(), Some(format!("{partition}_by_endpoint").as_str()), "{partition} has its own");
        assert_eq!(ok, Some(true), "{partition}'s is valid");
    }
    let rebuilt: String =
        client.query_one("SELECT pg_get_indexdef($1::text::regclass)", &[&broken]).await.unwrap().get(0);
    assert!(rebuilt.contains("(tenant_id, endpoint_id, msg_id)"), "the leftover was built again, not kept: {rebuilt}");
    assert_eq!(valid(&client, "inbound_keys_by_source").await, Some(true));
    for wide in ["deliveries_endpoint", "inbound_keys_received"] {
        assert_eq!(valid(&client, wide).await, None, "{wide} is dropped by the contract");
    }

    // A partition made later (as the workers make them, ahead of time) has it too.
    let family = partitions::family("deliveries").unwrap();
    let from = Utc::now() + Duration::days(400);
    partitions::create(&client, family, from, from + Duration::days(1)).await.unwrap();
    let after = attached(&client, "deliveries", "deliveries_by_endpoint").await;
    assert_eq!(after.len(), parts.len() + 1);
    assert!(after.iter().all(|(_, index, ok)| index.is_some() && *ok == Some(true)), "{after:?}");
    assert_eq!(valid(&client, "deliveries_by_endpoint").await, Some(true));

    // An endpoint's deliveries, as its message list reads them, go through it.
    client.batch_execute("SET enable_seqscan = off; SET enable_bitmapscan = off").await.unwrap();
    let plan: Vec<String> = client
        .query(
            "EXPLAIN SELECT msg_id FROM deliveries WHERE tenant_id = 'tnt_x' AND app_id = 'app_x'
               AND endpoint_id = 'ep_x' AND msg_id < 'msg_z' ORDER BY msg_id DESC LIMIT 10",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan.iter().any(|l| l.contains("_by_endpoint")), "{plan:#?}");
}

/// Postgres checks a partitioned index's validity only when a partition's index
/// is attached: a build that stopped with one partition left, which retention
/// then dropped, left nothing to attach, and the parent invalid for good.
#[tokio::test]
async fn a_build_whose_last_unindexed_partition_was_dropped_meanwhile_ends_valid() {
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0043"), Switch::Apply).await.unwrap();
    let parts = attached(&client, "deliveries", "deliveries_endpoint").await;
    let (last, rest) = parts.split_last().unwrap();
    client
        .batch_execute("CREATE INDEX deliveries_by_endpoint ON ONLY deliveries (tenant_id, endpoint_id, msg_id)")
        .await
        .unwrap();
    for (partition, _, _) in rest {
        client
            .batch_execute(&format!(
                "CREATE INDEX {partition}_by_endpoint ON {partition} (tenant_id, endpoint_id, msg_id);
                 ALTER INDEX deliveries_by_endpoint ATTACH PARTITION {partition}_by_endpoint"
            ))
            .await
            .unwrap();
    }
    client
        .batch_execute(&format!("ALTER TABLE deliveries DETACH PARTITION {0}; DROP TABLE {0}", last.0))
        .await
        .unwrap();
    assert_eq!(valid(&client, "deliveries_by_endpoint").await, Some(false), "the state a re-run meets");

    migrate::run_list(&mut client, MIGRATIONS, None, Switch::Apply, Contracts::Apply).await.unwrap();
    assert_eq!(valid(&client, "deliveries_by_endpoint").await, Some(true));
}
