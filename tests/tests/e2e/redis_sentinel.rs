//! Redis through Redis Sentinel, on the Redis handle itself: a silent Sentinel
//! first in the list costs nothing, and a failover that leaves the old master
//! answering (now as a replica) is followed.

use std::time::{Duration, Instant};

use hookgate_shared::redis::{Redis, RedisState, RedisTarget};
use hookgate_tests::redis_cluster::{Blackhole, RedisSentinel, SENTINEL_MASTER};

fn handle(url: String) -> Redis {
    let target = RedisTarget {
        url,
        cluster: false,
        sentinel_master: Some(SENTINEL_MASTER.into()),
        sentinel_password: None,
        ca_file: None,
    };
    let errors = hookgate_shared::metrics::Metrics::new(false).redis_errors;
    Redis::new(Some(&target), "hg:", Duration::from_millis(250), errors).unwrap()
}

async fn set(redis: &Redis, key: &str, value: &str) -> bool {
    let (key, value) = (key.to_owned(), value.to_owned());
    redis
        .call(|mut c| async move {
            hookgate_shared::redis::cmd("SET").arg(&key).arg(&value).query_async::<()>(&mut c).await
        })
        .await
        .is_some()
}

#[tokio::test]
async fn a_silent_first_sentinel_does_not_keep_redis_from_being_found_through_the_next() {
    let sentinel = RedisSentinel::start();
    let silent = Blackhole::start();
    let redis = handle(format!("redis://127.0.0.1:{}/,{}", silent.port, sentinel.url()));
    // Asked one after the other, the silent Sentinel would eat every connect's
    // whole bound and Redis would stay down; asked together, the first connect
    // finds the master.
    assert_eq!(redis.state().await, RedisState::Up);
    assert!(set(&redis, "hg:probe", "1").await);
    assert_eq!(sentinel.get(sentinel.master_port, "hg:probe"), "1");
}

#[tokio::test]
async fn a_failover_that_leaves_the_old_master_answering_is_followed() {
    let sentinel = RedisSentinel::start();
    let redis = handle(sentinel.url());
    assert!(set(&redis, "hg:before", "1").await);
    assert_eq!(sentinel.get(sentinel.master_port, "hg:before"), "1");
    // The old master stays up as a replica: no connection breaks. Writes to it
    // answer READONLY, and the Sentinels are asked again every few seconds.
    sentinel.fail_over_gracefully();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        n += 1;
        let value = format!("v{n}");
        if set(&redis, "hg:after", &value).await && sentinel.get(sentinel.replica_port, "hg:after") == value {
            break;
        }
        assert!(Instant::now() < deadline, "writes never reached the promoted replica");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
