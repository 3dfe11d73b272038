//! What a destination's kept connection promises, against real servers on loopback: a
//! RabbitMQ node of the test's own (a message the broker returns is never recorded as
//! confirmed, however the broker batches its acks).

use std::time::Duration;

use futures_util::future::join_all;
use hookgate_egress::{
    deliver::send::{Outcome, Sender},
    destinations::{config::Config, Outbound, Publishers},
    ssrf::Guard,
};
use hookgate_shared::ids::{AppId, EndpointId, TenantId};
use hookgate_tests::rabbitmq::RabbitMq;
use lapin::{
    options::QueueDeclareOptions,
    types::{FieldTable, ShortString},
};

fn loopback() -> Guard {
    Guard::new(vec!["127.0.0.0/8".parse().unwrap()])
}

fn sender(guard: Guard) -> Sender {
    Sender::new(guard, Duration::from_secs(2), Duration::from_secs(10), None, true)
}

fn outbound<'a>(msg_id: &'a str, headers: &'a [(String, String)]) -> Outbound<'a> {
    Outbound {
        app_id: "app_1",
        msg_id,
        event_type: "order.paid",
        event_id: None,
        channels: None,
        payload: b"{\"n\":1}",
        content_type: "application/json",
        created_at: chrono::Utc::now(),
        timestamp: chrono::Utc::now().timestamp(),
        headers,
    }
}

#[tokio::test]
async fn an_unroutable_message_is_never_recorded_as_confirmed_when_the_broker_acks_several_at_once() {
    let broker = RabbitMq::start().await;
    let conn = lapin::Connection::connect(&broker.uri(), lapin::ConnectionProperties::default()).await.unwrap();
    let admin = conn.create_channel().await.unwrap();
    // A transient queue: it confirms as soon as it takes a message, so its acks reach
    // the channel while later publishes are still being routed, and the broker acks
    // several at once (`multiple`) between the returns of the others.
    admin
        .queue_declare(ShortString::from("routed"), QueueDeclareOptions::default(), FieldTable::default())
        .await
        .unwrap();

    // One destination's connection (one key, one fingerprint) carries publishes that
    // are routed and publishes no queue takes, at once: what a destination sees when
    // its queue is deleted or unbound while messages are in flight.
    let publishers = Publishers::default();
    let key = (TenantId::generate(), AppId::from_db("app_1".into()), EndpointId::from_db("ep_1".into()));
    let config = |queue: &str| {
        let c = serde_json::json!({"uri": broker.uri(), "routingKey": queue, "mandatory": true});
        Config::parse("rabbitMq", c, &loopback()).unwrap()
    };
    let (routed, nowhere) = (config("routed"), config("nowhere"));
    let (guard, sender) = (loopback(), sender(loopback()));
    let ids: Vec<String> = (0..400).map(|i| format!("msg_{i:04}")).collect();
    let headers = Vec::new();
    let sent = join_all(ids.iter().enumerate().map(|(i, id)| {
        let cfg = if i % 2 == 0 { &routed } else { &nowhere };
        let (publishers, key, guard, sender, headers) = (&publishers, &key, &guard, &sender, &headers);
        async move {
            let out = outbound(id, headers);
            publishers.publish(key, b"one destination", cfg, guard, sender, &out, Duration::from_secs(20), false).await
        }
    }))
    .await;

    let mut wrong = Vec::new();
    for (i, s) in sent.iter().enumerate() {
        let ok = match i % 2 {
            0 => s.outcome == Outcome::Success,
            _ => s.outcome == Outcome::Refused && s.body.contains("returned by RabbitMQ: 312 NO_ROUTE"),
        };
        if !ok {
            wrong.push(format!(
                "{} ({}): {:?} {}",
                ids[i],
                if i % 2 == 0 { "routed" } else { "unroutable" },
                s.outcome,
                s.body
            ));
        }
    }
    assert!(wrong.is_empty(), "{} of 400 recorded wrongly, e.g. {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    let passive = QueueDeclareOptions { passive: true, ..Default::default() };
    let queue = admin.queue_declare(ShortString::from("routed"), passive, FieldTable::default()).await.unwrap();
    assert_eq!(queue.message_count(), 200, "every routed message is in the queue, once");
}

#[tokio::test]
async fn a_publish_that_fails_on_a_replaced_link_leaves_the_newer_link_to_the_publishes_on_it() {
    let broker = RabbitMq::start().await;
    let conn = lapin::Connection::connect(&broker.uri(), lapin::ConnectionProperties::default()).await.unwrap();
    let admin = conn.create_channel().await.unwrap();
    admin
        .queue_declare(ShortString::from("routed"), QueueDeclareOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let key = (TenantId::generate(), AppId::from_db("app_1".into()), EndpointId::from_db("ep_1".into()));
    let c = serde_json::json!({"uri": broker.uri(), "routingKey": "routed"});
    let cfg = Config::parse("rabbitMq", c, &loopback()).unwrap();
    let (guard, sender, headers) = (loopback(), sender(loopback()), Vec::new());
    let bound = Duration::from_secs(20);
    let mut tried = 0;
    loop {
        tried += 1;
        let publishers = Publishers::default();
        let publish = |seal: &'static [u8], id: &'static str| {
            let (publishers, key, cfg, guard, sender, headers) = (&publishers, &key, &cfg, &guard, &sender, &headers);
            async move { publishers.publish(key, seal, cfg, guard, sender, &outbound(id, headers), bound, false).await }
        };
        let warm = publish(b"before", "msg_0").await;
        assert_eq!(warm.outcome, Outcome::Success, "{}", warm.body);
        // The first publish goes out on the link; the second, with the destination's
        // configuration changed, replaces the link under it, so the first one fails.
        let (old, new) = tokio::join!(publish(b"before", "msg_1"), publish(b"after", "msg_2"));
        if old.outcome == Outcome::Success {
            // Confirmed before its link went: try again.
            assert!(tried < 20, "the first publish was confirmed before its link was replaced, every time");
            continue;
        }
        assert_eq!(new.outcome, Outcome::Success, "the failure on the old link took the new one: {}", new.body);
        let after = publish(b"after", "msg_3").await;
        assert_eq!(after.outcome, Outcome::Success, "{}", after.body);
        break;
    }
}

#[tokio::test]
async fn a_publish_that_times_out_leaves_the_other_publishes_on_its_connection_to_be_confirmed() {
    let broker = RabbitMq::start().await;
    let conn = lapin::Connection::connect(&broker.uri(), lapin::ConnectionProperties::default()).await.unwrap();
    let admin = conn.create_channel().await.unwrap();
    admin
        .queue_declare(ShortString::from("routed"), QueueDeclareOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let key = (TenantId::generate(), AppId::from_db("app_1".into()), EndpointId::from_db("ep_1".into()));
    let c = serde_json::json!({"uri": broker.uri(), "routingKey": "routed"});
    let cfg = Config::parse("rabbitMq", c, &loopback()).unwrap();
    let (guard, sender, headers) = (loopback(), sender(loopback()), Vec::new());
    let publishers = Publishers::default();
    let publish = |id: &'static str, bound: Duration| {
        let (publishers, key, cfg, guard, sender, headers) = (&publishers, &key, &cfg, &guard, &sender, &headers);
        async move { publishers.publish(key, b"one", cfg, guard, sender, &outbound(id, headers), bound, false).await }
    };
    assert_eq!(publish("msg_0", Duration::from_secs(20)).await.outcome, Outcome::Success, "the link is made");
    // A memory alarm: the broker stops reading what publishers send, so both
    // publishes below wait on the one link for their confirms.
    broker.ctl(&["set_vm_memory_high_watermark", "0"]).await;
    let (slow, fast) = tokio::join!(publish("msg_1", Duration::from_secs(60)), async {
        let fast = publish("msg_2", Duration::from_secs(1)).await;
        // Its connection is forgotten (a timeout's); the alarm ends after.
        broker.ctl(&["set_vm_memory_high_watermark", "0.4"]).await;
        fast
    });
    assert_eq!(fast.outcome, Outcome::Timeout, "{}", fast.body);
    assert_eq!(slow.outcome, Outcome::Success, "the other publish on the link: {}", slow.body);
}
