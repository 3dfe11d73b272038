//! Contract migrations, the last step of an expand/contract upgrade: applied by
//! the workers once no process of an older release is connected (as
//! `pg_stat_activity` names them), never while one is, and straight through on a
//! new installation. Every process announces the level it knows.

use std::time::{Duration, Instant};

use hookgate_gateway::Role;
use hookgate_shared::{
    contract::{self, Watch},
    migrate::{self, Contracts, Switch},
    status::EndpointKind,
    store::endpoint_kinds,
};
use hookgate_tests::{app::default_env, db::connect, TestApp, TestDb};
use serde_json::json;

/// The names the releases before levels gave: `hookgate`, or the operator's own.
const BARE: &[&str] = &["hookgate", "billing"];

/// The embedded migrations and a contract after them, numbered at this
/// release's level (so that this release's processes know it).
fn with_contract() -> (&'static [(&'static str, &'static str)], &'static str) {
    let version: &'static str = Box::leak(format!("{}_zz_test_contract", migrate::level()).into_boxed_str());
    let mut list = migrate::MIGRATIONS.to_vec();
    list.push((version, "-- hookgate:contract\nCREATE TABLE contracted (x int);"));
    (Box::leak(list.into_boxed_slice()), version)
}

/// `url` with an `application_name`: a connection as a process announcing `name` makes.
fn named(url: &str, name: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={}", name.replace(' ', "%20").replace(':', "%3A"))
}

async fn contracted(db: &tokio_postgres::Client) -> bool {
    db.query_one("SELECT to_regclass('contracted') IS NOT NULL", &[]).await.unwrap().get(0)
}

/// Waits until Postgres no longer lists a connection named `name` (a closed
/// connection's backend ends a moment after the client lets go).
async fn gone(db: &tokio_postgres::Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = db
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", &[&name])
            .await
            .unwrap()
            .get(0);
        if n == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{name} still connected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_contract_waits_while_a_process_of_an_older_release_is_connected_and_runs_by_itself_after() {
    let db = TestDb::new().await;
    let (list, version) = with_contract();
    // A process of this release, serving: its connections name its level.
    let app = TestApp::spawn_role(db.clone(), default_env(&db), Role::Api).await;
    let t = app.tenant().await;
    t.application().await;
    let mut me = connect(&named(&db.url, "the-test")).await;
    let ours = migrate::application_name(None);
    let n: i64 = me
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", &[&ours])
        .await
        .unwrap()
        .get(0);
    assert!(n > 0, "this release's connections announce {ours}");
    assert!(contract::older_connected(&me, version, BARE).await.unwrap().is_empty(), "this release knows the contract");

    // A process of a release before levels (by default, or named by the operator,
    // as its DATABASE_URL still names it), one of an older level, one behind a
    // pooler that adds to the name.
    for old in ["hookgate", "billing", "hookgate/0001", "hookgate/0001 - 127.0.0.1:5000"] {
        let held = connect(&named(&db.url, old)).await;
        assert_eq!(contract::older_connected(&me, version, BARE).await.unwrap(), vec![old.to_owned()]);
        let mut watch = Watch::default();
        assert!(contract::step(&mut me, list, BARE, &mut watch, Duration::ZERO).await.unwrap().is_empty());
        assert!(!contracted(&me).await, "no contract while {old} is connected");
        drop(held);
        gone(&me, old).await;
    }
    // `hookgate migrate` stops before it on a database in use, and says so.
    let outcome = migrate::run_list(&mut me, list, None, Switch::Hold, Contracts::Hold).await.unwrap();
    assert_eq!(outcome.contract_pending, Some(version));
    assert!(!contracted(&me).await);

    // Gone: after the grace, it runs by itself; not before.
    let mut watch = Watch::default();
    let grace = Duration::from_millis(600);
    assert!(contract::step(&mut me, list, BARE, &mut watch, grace).await.unwrap().is_empty(), "the grace starts");
    assert!(!contracted(&me).await);
    tokio::time::sleep(grace).await;
    assert_eq!(contract::step(&mut me, list, BARE, &mut watch, grace).await.unwrap(), vec![version]);
    assert!(contracted(&me).await);
    // Done once: later looks find nothing to do.
    assert!(contract::step(&mut me, list, BARE, &mut watch, Duration::ZERO).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_new_installation_goes_straight_through_its_contracts() {
    let db = TestDb::empty().await;
    let (list, version) = with_contract();
    let mut me = connect(&db.url).await;
    let outcome = migrate::run_list(&mut me, list, None, Switch::Hold, Contracts::Hold).await.unwrap();
    assert_eq!(outcome.contract_pending, None);
    assert_eq!(outcome.applied.last(), Some(&version));
    assert!(contracted(&me).await);
}

/// A release's new endpoint kind is admitted as a contract runs, with no
/// migration of its own: at once on a new installation; on one in use by the
/// workers, once no process that does not know it (which would take such a row
/// for an HTTP endpoint) has been connected for the grace. Until then, creating
/// an endpoint of it answers 409, never a 500.
#[tokio::test]
async fn a_new_endpoint_kind_is_admitted_only_once_no_process_unaware_of_it_is_connected() {
    let db = TestDb::new().await;
    let app = TestApp::spawn_role(db.clone(), default_env(&db), Role::Api).await;
    let t = app.tenant().await;
    let a = t.application().await;
    let mut me = connect(&named(&db.url, "the-test")).await;
    // As a release finds a database that lacks its newest kind: the polling
    // endpoint stands for it (it needs no configuration).
    let newest = EndpointKind::PollingEndpoint.code();
    me.execute("DELETE FROM endpoint_kinds WHERE code = $1", &[&newest]).await.unwrap();
    assert_eq!(endpoint_kinds::missing(&me).await.unwrap(), vec![newest]);
    let refused =
        t.post(&format!("/api/v1/app/{a}/destination"), json!({"type": "pollingEndpoint", "config": {}}), 409).await;
    assert_eq!(refused["code"], "kind_not_admitted", "{refused}");

    // `hookgate migrate` on a database in use leaves it to the workers.
    migrate::run(&mut me, Switch::Hold).await.unwrap();
    assert_eq!(endpoint_kinds::missing(&me).await.unwrap(), vec![newest]);
    // A process that knows the kinds only up to the one before holds it back.
    let unaware = format!("hookgate/{} kinds/{}", migrate::level(), newest - 1);
    for old in [unaware.as_str(), "hookgate/0048 kinds/7"] {
        let held = connect(&named(&db.url, old)).await;
        assert_eq!(contract::unaware_connected(&me, newest, BARE).await.unwrap(), vec![old.to_owned()]);
        let mut watch = Watch::default();
        assert!(!contract::admit_kinds(&me, BARE, &mut watch, Duration::ZERO).await.unwrap());
        assert_eq!(endpoint_kinds::missing(&me).await.unwrap(), vec![newest], "not while {old} is connected");
        drop(held);
        gone(&me, old).await;
    }
    // This release's own processes (the API above) know it; after the grace it is admitted.
    let mut watch = Watch::default();
    let grace = Duration::from_millis(600);
    assert!(!contract::admit_kinds(&me, BARE, &mut watch, grace).await.unwrap(), "the grace starts");
    tokio::time::sleep(grace).await;
    assert!(contract::admit_kinds(&me, BARE, &mut watch, grace).await.unwrap());
    assert!(endpoint_kinds::missing(&me).await.unwrap().is_empty());
    t.post(&format!("/api/v1/app/{a}/destination"), json!({"type": "pollingEndpoint", "config": {}}), 201).await;
}
