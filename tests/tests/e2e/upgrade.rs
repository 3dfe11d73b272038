//! The upgrade to time-partitioned tables on a database that holds data, with
//! the previous release writing, with its own statements, between the expand
//! steps (0015, 0016) and the switch (0017): every row is kept in place and read
//! back, and every decision it made (an admitted key, an eventId, a request key)
//! still holds under the new release's code.

use chrono::{Duration as Days, Utc};
use hookgate_shared::{
    ids::{AppId, InboundEventId, MessageId, Ref, SourceId, TenantId},
    migrate::{self, Switch},
    status::InboundStatus,
    store::{
        inbound_events::{self, NewInbound},
        messages::{self, NewMessage},
        partitions, StoreError,
    },
};
use hookgate_tests::TestDb;
use tokio_postgres::Client;

/// An inbound event as the previous release admitted one (its `ON CONFLICT` on
/// the key); whether it was inserted.
async fn old_admit(db: &Client, t: &str, s: &str, a: &str, key: &str, id: &str) -> bool {
    let n = db
        .execute(
            "INSERT INTO inbound_events (tenant_id, source_id, key, id, status, app_id, event_type, content_type,
                payload)
             VALUES ($1, $2, $3, $4, 'accepted', $5, 'invoice.paid', 'application/json', '\\x7b7d')
             ON CONFLICT (tenant_id, source_id, key) DO NOTHING",
            &[&t, &s, &key, &id, &a],
        )
        .await
        .unwrap();
    n == 1
}

/// A message as the previous release created one (`ON CONFLICT` on the eventId).
async fn old_publish(db: &Client, t: &str, a: &str, id: &str, event_id: &str, request_key: &str) -> bool {
    let n = db
        .execute(
            "INSERT INTO messages (tenant_id, app_id, id, event_id, event_type, payload, request_key)
             VALUES ($1, $2, $3, $4, 'order.created', '\\x7b7d', $5)
             ON CONFLICT (tenant_id, app_id, event_id) WHERE event_id IS NOT NULL DO NOTHING",
            &[&t, &a, &id, &event_id, &request_key],
        )
        .await
        .unwrap();
    n == 1
}

async fn count(db: &Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.unwrap().get(0)
}

async fn partition(db: &Client, table: &str, column: &str, id: &str) -> String {
    let sql = format!("SELECT tableoid::regclass::text FROM {table} WHERE {column} = $1");
    db.query_one(&sql, &[&id]).await.unwrap().get(0)
}

fn message(id: &MessageId, event_id: &str) -> NewMessage {
    NewMessage {
        id: id.clone(),
        event_id: Some(event_id.into()),
        event_type: "order.created".into(),
        channels: None,
        tags: None,
        payload: b"{}".to_vec(),
        content_type: "application/json".into(),
        idempotency_key: None,
        request_key: None,
        traceparent: None,
        payload_expires_at: None,
    }
}

#[tokio::test]
async fn the_switch_to_partitions_keeps_every_row_and_decision_even_those_written_during_the_expand() {
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0014"), Switch::Hold).await.unwrap();
    let (tenant, app, source) = (TenantId::generate(), AppId::generate(), SourceId::generate());
    let (t, a, s) = (tenant.as_str(), app.as_str(), source.as_str());
    client.execute("INSERT INTO tenants (id, name) VALUES ($1, 'acme')", &[&t]).await.unwrap();
    client.execute("INSERT INTO applications (tenant_id, id, name) VALUES ($1, $2, 'shop')", &[&t, &a]).await.unwrap();
    client
        .execute(
            "INSERT INTO sources (tenant_id, id, name, provider, app_id) VALUES ($1, $2, 'stripe', 'stripe', $3)",
            &[&t, &s, &a],
        )
        .await
        .unwrap();
    // Before the upgrade: an admitted event, a message with its delivery and attempt.
    let evt_old = InboundEventId::generate();
    assert!(old_admit(&client, t, s, a, "key-old", evt_old.as_str()).await);
    let msg_old = MessageId::generate();
    assert!(old_publish(&client, t, a, msg_old.as_str(), "order-old", "req-old").await);
    client
        .execute(
            "INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, status) VALUES ($1, $2, $3, 'ep_x', 0)",
            &[&t, &a, &msg_old.as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO attempts (tenant_id, app_id, id, msg_id, endpoint_id, url, status, response_status_code,
                response_duration_ms)
             VALUES ($1, $2, 'atmpt_old', $3, 'ep_x', 'https://example.invalid/', 0, 200, 5)",
            &[&t, &a, &msg_old.as_str()],
        )
        .await
        .unwrap();

    // The expand steps, with the previous release still writing in between.
    migrate::run_until(&mut client, Some("0016"), Switch::Hold).await.unwrap();
    let evt_mid = InboundEventId::generate();
    assert!(old_admit(&client, t, s, a, "key-mid", evt_mid.as_str()).await);
    assert!(!old_admit(&client, t, s, a, "key-old", InboundEventId::generate().as_str()).await, "still decided");
    let msg_mid = MessageId::generate();
    assert!(old_publish(&client, t, a, msg_mid.as_str(), "order-mid", "req-mid").await);
    // A sync forward that failed: the previous release released (deleted) its row.
    let evt_gone = InboundEventId::generate();
    assert!(old_admit(&client, t, s, a, "key-released", evt_gone.as_str()).await);
    client.execute("DELETE FROM inbound_events WHERE id = $1", &[&evt_gone.as_str()]).await.unwrap();
    // Mirrored into the key tables as it happened.
    assert_eq!(count(&client, "SELECT count(*) FROM inbound_keys").await, 2, "key-old and key-mid, not the released");
    assert_eq!(count(&client, "SELECT count(*) FROM message_event_ids").await, 2);
    assert_eq!(count(&client, "SELECT count(*) FROM message_request_keys").await, 2);

    // The switch: not without the operator's word on a database in use, whose
    // previous release may still be running.
    let held = migrate::run(&mut client, Switch::Hold).await.unwrap();
    assert_eq!(held.stopped_at, Some("0017_partitioning_switch"));
    // While the switch waits, each such run moves the cutover on when it comes
    // near: the previous release's new rows keep passing the checks. As if the
    // expand had run weeks ago: the cutover a day away, the check on it.
    client
        .batch_execute(
            "UPDATE hookgate_partition_cutover SET below = now() + interval '1 day';
             ALTER TABLE messages DROP CONSTRAINT messages_below_cutover;
             DO $$ BEGIN EXECUTE format('ALTER TABLE messages ADD CONSTRAINT messages_below_cutover CHECK (id < %L)',
                 hookgate_id_floor('msg', now() + interval '1 day')); END $$;",
        )
        .await
        .unwrap();
    let soon = MessageId::generated_at(Utc::now() + Days::days(3));
    let refused = client
        .execute(
            "INSERT INTO messages (tenant_id, app_id, id, event_type, payload) VALUES ($1, $2, $3, 'x', '\\x7b7d')",
            &[&t, &a, &soon.as_str()],
        )
        .await;
    assert!(refused.is_err(), "past the cutover the previous release could not write");
    let held = migrate::run(&mut client, Switch::Hold).await.unwrap();
    assert_eq!(held.stopped_at, Some("0017_partitioning_switch"));
    let by = held.switch_by.expect("the cutover the previous release may write until");
    assert!(by > Utc::now() + Days::days(29), "moved a month on: {by}");
    assert!(old_publish(&client, t, a, soon.as_str(), "order-soon", "req-soon").await, "it writes again");
    let pending = migrate::pending_switches(&client).await.unwrap();
    assert_eq!(pending, vec!["0017_partitioning_switch", "0025_keyed_inbound_keys", "0027_hot_claims"]);
    // And the contracts, as the workers apply them once no older process is left:
    // this release's expand steps after them are in too, as it needs them to start.
    migrate::run_list(&mut client, migrate::MIGRATIONS, None, Switch::Apply, migrate::Contracts::Apply).await.unwrap();
    assert!(migrate::pending_switches(&client).await.unwrap().is_empty());
    for (table, column, id) in [
        ("messages", "id", msg_old.as_str()),
        ("deliveries", "msg_id", msg_old.as_str()),
        ("attempts", "msg_id", msg_old.as_str()),
        ("inbound_events", "id", evt_old.as_str()),
        ("inbound_events", "id", evt_mid.as_str()),
    ] {
        assert_eq!(partition(&client, table, column, id).await, format!("{table}_legacy"), "kept in place");
    }
    let legacy = partitions::list(&client).await.unwrap();
    let below: chrono::DateTime<Utc> =
        client.query_one("SELECT below FROM hookgate_partition_cutover", &[]).await.unwrap().get(0);
    for table in ["messages", "deliveries", "attempts", "inbound_events"] {
        let first = legacy.iter().find(|p| p.family == table).unwrap();
        assert_eq!((first.name.as_str(), first.from, first.to), (&*format!("{table}_legacy"), None, below));
    }

    // Every decision holds under the new release.
    let again = NewInbound {
        id: InboundEventId::generate(),
        key: "key-old".into(),
        plain_key: None,
        app_id: app.clone(),
        msg_id: None,
        event_type: "invoice.paid".into(),
        content_type: "application/json".into(),
        payload: b"{}".to_vec(),
    };
    for key in ["key-old", "key-mid"] {
        let copy = NewInbound { key: key.into(), id: InboundEventId::generate(), ..again.clone() };
        assert!(!inbound_events::admit(&client, &tenant, &source, &copy, InboundStatus::Accepted, None).await.unwrap());
        let first = inbound_events::duplicate(&client, &tenant, &source, key, None).await.unwrap().unwrap();
        assert!([&evt_old, &evt_mid].contains(&&first.id), "the first copy's event: {first:?}");
    }
    // Keys are stored keyed from the switch on (0025 ran with it): a copy of an
    // event admitted before, under its keyed key, is a duplicate through its plain
    // one, and is answered with the key the event is stored under.
    let keyed_at: Option<chrono::DateTime<Utc>> = inbound_events::keyed_at(&client).await.unwrap();
    assert!(keyed_at.is_some_and(|at| (Utc::now() - at).num_minutes() < 5), "{keyed_at:?}");
    let keyed = NewInbound {
        key: "keyed-form-of-key-old".into(),
        plain_key: Some("key-old".into()),
        id: InboundEventId::generate(),
        ..again.clone()
    };
    assert!(!inbound_events::admit(&client, &tenant, &source, &keyed, InboundStatus::Accepted, None).await.unwrap());
    let first = inbound_events::duplicate(&client, &tenant, &source, &keyed.key, keyed.plain_key.as_deref())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&first.id, first.key.as_str()), (&evt_old, "key-old"));
    let released = NewInbound { key: "key-released".into(), id: InboundEventId::generate(), ..again.clone() };
    assert!(inbound_events::admit(&client, &tenant, &source, &released, InboundStatus::Accepted, None).await.unwrap());
    for event_id in ["order-old", "order-mid"] {
        let err =
            messages::publish(&client, &tenant, &Ref::Id(app.clone()), &message(&MessageId::generate(), event_id))
                .await
                .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(ref c) if c == "message_event_ids_pkey"), "{err}");
    }
    let day = std::time::Duration::from_secs(86_400);
    let found = messages::by_request_key(&client, &tenant, &Ref::Id(app.clone()), "req-old", day).await.unwrap();
    assert_eq!(found.map(|m| m.id), Some(msg_old.clone()), "the old request key finds its message");
    let old = messages::get(&client, &tenant, &app, &Ref::Id(msg_old.clone())).await.unwrap().unwrap();
    assert_eq!(old.payload.as_deref(), Some(&b"{}"[..]));

    // New rows: before the cutover into the old table, after it into a day's partition.
    let now = MessageId::generate();
    messages::publish(&client, &tenant, &Ref::Id(app.clone()), &message(&now, "order-new")).await.unwrap().unwrap();
    assert_eq!(partition(&client, "messages", "id", now.as_str()).await, "messages_legacy");
    // The partitions after the cutover are made as their days come near.
    let messages_family = partitions::family("messages").unwrap();
    partitions::ensure(&client, messages_family, Utc::now(), below + Days::days(1), 7).await.unwrap();
    let later = MessageId::generated_at(below + Days::hours(1));
    messages::publish(&client, &tenant, &Ref::Id(app.clone()), &message(&later, "order-later")).await.unwrap().unwrap();
    let day = below.format("%Y%m%d");
    assert_eq!(partition(&client, "messages", "id", later.as_str()).await, format!("messages_p{day}"));
    // Nothing of the expand is left.
    let triggers = count(&client, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'hookgate_mirror%'").await;
    assert_eq!(triggers, 0);
}

#[tokio::test]
async fn holding_before_the_keyed_keys_switch_leaves_the_partitioned_tables_alone_and_old_key_inserts_fail_after_it() {
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    // A database that went through the partitioning switch a while ago: its
    // cutover (which 0017 keeps) is long past.
    migrate::run_until(&mut client, Some("0024"), Switch::Hold).await.unwrap();
    client.batch_execute("UPDATE hookgate_partition_cutover SET below = now() - interval '40 days'").await.unwrap();
    let (tenant, app, source) = (TenantId::generate(), AppId::generate(), SourceId::generate());
    let (t, a, s) = (tenant.as_str(), app.as_str(), source.as_str());
    client.execute("INSERT INTO tenants (id, name) VALUES ($1, 'acme')", &[&t]).await.unwrap();
    client.execute("INSERT INTO applications (tenant_id, id, name) VALUES ($1, $2, 'shop')", &[&t, &a]).await.unwrap();
    let new_source =
        "INSERT INTO sources (tenant_id, id, name, provider, app_id) VALUES ($1, $2, 'stripe', 'stripe', $3)";
    client.execute(new_source, &[&t, &s, &a]).await.unwrap();
    let old_key = "INSERT INTO inbound_keys (tenant_id, source_id, key, event_id) VALUES ($1, $2, $3, $4)";
    client.execute(old_key, &[&t, &s, &"plain-before", &InboundEventId::generate().as_str()]).await.unwrap();

    let held = migrate::run(&mut client, Switch::Hold).await.unwrap();
    assert_eq!((held.stopped_at, held.switch_by), (Some("0025_keyed_inbound_keys"), None));
    let checks = count(&client, "SELECT count(*) FROM pg_constraint WHERE conname LIKE '%below_cutover'").await;
    assert_eq!(checks, 0, "no cutover check was made on the partitioned tables");
    let stale = count(&client, "SELECT count(*) FROM hookgate_partition_cutover WHERE below < now()").await;
    assert_eq!(stale, 1, "the cutover was not moved");

    migrate::run(&mut client, Switch::Apply).await.unwrap();
    let keyed_at = inbound_events::keyed_at(&client).await.unwrap();
    assert!(keyed_at.is_some(), "a database that held keys records when keying began");
    let plain: bool =
        client.query_one("SELECT keyed FROM inbound_keys WHERE key = 'plain-before'", &[]).await.unwrap().get(0);
    assert!(!plain, "a key stored before the switch is marked plain");
    // The previous release's insert names no form: refused, never a plain key beside keyed ones.
    let err = client.execute(old_key, &[&t, &s, &"plain-after", &InboundEventId::generate().as_str()]).await;
    let err = err.expect_err("an insert of the previous release fails after the switch");
    assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::NOT_NULL_VIOLATION), "{err}");
}

#[tokio::test]
async fn a_delivery_in_flight_across_the_hot_claims_switch_is_due_when_its_lease_ends_and_claimed_once() {
    use hookgate_shared::{
        db,
        ids::EndpointId,
        store::queues::{self, Want},
    };
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0026"), Switch::Apply).await.unwrap();
    for table in ["messages", "deliveries"] {
        let family = partitions::family(table).unwrap();
        partitions::ensure(&client, family, Utc::now(), Utc::now() + Days::days(2), 1).await.unwrap();
    }
    let (tenant, app, endpoint) = (TenantId::generate(), AppId::generate(), EndpointId::generate());
    let (t, a, e) = (tenant.as_str(), app.as_str(), endpoint.as_str());
    client.execute("INSERT INTO tenants (id, name) VALUES ($1, 'acme')", &[&t]).await.unwrap();
    client.execute("INSERT INTO applications (tenant_id, id, name) VALUES ($1, $2, 'shop')", &[&t, &a]).await.unwrap();
    let (flying, waiting) = (MessageId::generate(), MessageId::generate());
    for m in [&flying, &waiting] {
        client
            .execute(
                "INSERT INTO messages (tenant_id, app_id, id, event_type, payload) VALUES ($1, $2, $3, 'x', '\\x7b7d')",
                &[&t, &a, &m.as_str()],
            )
            .await
            .unwrap();
    }
    // As the previous release left them: one claimed (sending, its lease ending
    // in an hour, under its token), one pending and due.
    client
        .execute(
            "INSERT INTO deliveries (tenant_id, app_id, msg_id, endpoint_id, status, next_attempt_at, lease_token)
             VALUES ($1, $2, $3, $4, 3, now() + interval '1 hour', 7), ($1, $2, $5, $4, 1, now(), NULL)",
            &[&t, &a, &flying.as_str(), &e, &waiting.as_str()],
        )
        .await
        .unwrap();

    let held = migrate::run(&mut client, Switch::Hold).await.unwrap();
    assert_eq!(held.stopped_at, Some("0027_hot_claims"), "a switch: held on a database in use");
    migrate::run(&mut client, Switch::Apply).await.unwrap();

    let row = client
        .query_one(
            "SELECT status, next_attempt_at > now() + interval '50 minutes', leased_until = next_attempt_at
             FROM deliveries WHERE msg_id = $1",
            &[&flying.as_str()],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, i16>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)), (1, true, true));
    let due_index = count(&client, "SELECT count(*) FROM pg_class WHERE relname = 'deliveries_due'").await;
    assert_eq!(due_index, 0, "the previous release's due index is gone");
    let roomy = count(
        &client,
        "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'deliveries'::regclass AND NOT ('fillfactor=70' = ANY (COALESCE(c.reloptions, '{}')))",
    )
    .await;
    assert_eq!(roomy, 0, "every deliveries partition keeps room for a claim's new version");

    // The delivery in flight waits for the end of its lease; the other is claimed, once.
    let pool =
        db::pool(&db.url, 1, std::time::Duration::from_secs(2), std::time::Duration::from_secs(5), db::Plans::Chosen)
            .unwrap();
    let mut conn = pool.get().await.unwrap();
    let want = Want { app_id: app.clone(), endpoint_id: endpoint.clone(), room: 10, range: None };
    let wants = std::collections::BTreeMap::from([(tenant.clone(), vec![want])]);
    let lease = std::time::Duration::from_secs(30);
    let first = queues::claim_all(&mut conn, &wants, lease).await.unwrap();
    assert_eq!(first.iter().map(|c| c.msg_id.clone()).collect::<Vec<_>>(), vec![waiting.clone()]);
    assert!(queues::claim_all(&mut conn, &wants, lease).await.unwrap().is_empty(), "under its lease: not again");
    // The claim wrote no indexed column: a HOT update (its statistics flushed first).
    conn.batch_execute("SELECT pg_stat_force_next_flush()").await.unwrap();
    conn.batch_execute("SELECT 1").await.unwrap();
    let hot = count(
        &client,
        "SELECT COALESCE(sum(n_tup_hot_upd), 0)::bigint FROM pg_stat_user_tables WHERE relname LIKE 'deliveries_p%'",
    )
    .await;
    assert!(hot >= 1, "the claim was a HOT update ({hot})");
}
