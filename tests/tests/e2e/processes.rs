//! The `hookgate` binary as operators run it: migrate, config errors, the tenant CLI.

use hookgate_shared::crypto::MasterKey;
use hookgate_tests::{process::hookgate, TestApp, TestDb};
use reqwest::Method;
use serde_json::Value;

#[tokio::test]
async fn on_a_database_in_use_migrate_stops_before_the_switch_and_serve_refuses_until_it_is_applied() {
    use hookgate_shared::migrate::{self, Switch};
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    migrate::run_until(&mut client, Some("0016"), Switch::Hold).await.unwrap();
    client
        .execute("INSERT INTO tenants (id, name) VALUES ('tnt_01M8Y00000000000000000000', 'in use')", &[])
        .await
        .unwrap();
    let key = MasterKey::generate_base64();
    let env =
        [("DATABASE_URL", db.url.as_str()), ("HOOKGATE_MASTER_KEY", key.as_str()), ("HOOKGATE_LISTEN", "127.0.0.1:0")];
    let held = hookgate(&env).arg("migrate").output().await.unwrap();
    let said = String::from_utf8_lossy(&held.stderr).into_owned();
    assert!(!held.status.success(), "stops with an error: {said}");
    assert!(said.contains("0017_partitioning_switch") && said.contains("--switch"), "{said}");
    let serve = tokio::time::timeout(std::time::Duration::from_secs(30), hookgate(&env).arg("serve").output())
        .await
        .expect("serve refuses at once, it does not serve")
        .unwrap();
    let said = String::from_utf8_lossy(&serve.stderr).into_owned();
    assert!(!serve.status.success() && said.contains("--switch"), "{said}");
    // Across several releases at once, the later ones' contracts wait in the way
    // of their expand steps: with every old process stopped, they run here too.
    let switched = hookgate(&env).args(["migrate", "--switch"]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&switched.stdout).contains("0017_partitioning_switch"));
    let said = String::from_utf8_lossy(&switched.stderr).into_owned();
    assert!(!switched.status.success() && said.contains("hookgate migrate --contracts"), "{said}");
    let contracted = hookgate(&env).args(["migrate", "--switch", "--contracts"]).output().await.unwrap();
    assert!(contracted.status.success(), "{}", String::from_utf8_lossy(&contracted.stderr));
    assert!(migrate::pending_expands(&client).await.unwrap().is_empty());
    assert!(migrate::pending_switches(&client).await.unwrap().is_empty());
}

/// A process of a new release started before its `hookgate migrate` (an
/// orchestrator that starts both at once) refuses to serve, naming the
/// migration it needs, rather than serve on a schema it was not built for.
#[tokio::test]
async fn serve_refuses_a_database_without_this_releases_migrations_and_names_the_first() {
    use hookgate_shared::migrate::{self, Switch, MIGRATIONS};
    let db = TestDb::empty().await;
    let mut client = db.client().await;
    // The last migration that is not a contract (contracts may wait for the previous release to go).
    let at = MIGRATIONS.iter().rposition(|(_, sql)| !sql.starts_with(migrate::CONTRACT)).unwrap();
    let (last, _) = MIGRATIONS[at];
    let (before, _) = MIGRATIONS[at - 1];
    migrate::run_until(&mut client, Some(before), Switch::Apply).await.unwrap();
    let key = MasterKey::generate_base64();
    let env =
        [("DATABASE_URL", db.url.as_str()), ("HOOKGATE_MASTER_KEY", key.as_str()), ("HOOKGATE_LISTEN", "127.0.0.1:0")];
    let serve = tokio::time::timeout(std::time::Duration::from_secs(30), hookgate(&env).arg("serve").output())
        .await
        .expect("serve refuses at once, it does not serve")
        .unwrap();
    let said = String::from_utf8_lossy(&serve.stderr).into_owned();
    assert!(!serve.status.success() && said.contains(last) && said.contains("hookgate migrate"), "{said}");
    let migrated = hookgate(&env).arg("migrate").output().await.unwrap();
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    assert!(migrate::pending_expands(&client).await.unwrap().is_empty());
}

#[tokio::test]
async fn migrate_run_twice_at_once_applies_once_and_then_changes_nothing() {
    let db = TestDb::empty().await;
    let key = MasterKey::generate_base64();
    let env = [("DATABASE_URL", db.url.as_str()), ("HOOKGATE_MASTER_KEY", key.as_str())];
    let (a, b) = tokio::join!(hookgate(&env).arg("migrate").output(), hookgate(&env).arg("migrate").output());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    let outs = [String::from_utf8_lossy(&a.stdout).into_owned(), String::from_utf8_lossy(&b.stdout).into_owned()];
    assert_eq!(outs.iter().filter(|o| o.starts_with("applied")).count(), 1, "exactly one applied: {outs:?}");
    assert_eq!(outs.iter().filter(|o| o.starts_with("migrations up to date")).count(), 1, "{outs:?}");

    let client = db.client().await;
    let before: Vec<(String, String)> = client
        .query("SELECT version, applied_at::text FROM hookgate_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(before.len() >= 2, "{before:?}");
    let third = hookgate(&env).arg("migrate").output().await.unwrap();
    assert!(String::from_utf8_lossy(&third.stdout).starts_with("migrations up to date"));
    let after: Vec<(String, String)> = client
        .query("SELECT version, applied_at::text FROM hookgate_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(before, after);
}

#[tokio::test]
async fn a_missing_database_url_fails_at_start_naming_the_setting() {
    let key = MasterKey::generate_base64();
    let out = hookgate(&[("HOOKGATE_MASTER_KEY", key.as_str())]).arg("serve").output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("DATABASE_URL"), "{err}");
}

#[tokio::test]
async fn a_bad_master_key_fails_at_start_naming_the_setting() {
    for bad in ["not-base64!", "c2hvcnQ="] {
        let out = hookgate(&[("DATABASE_URL", "postgres://x@127.0.0.1:1/x"), ("HOOKGATE_MASTER_KEY", bad)])
            .arg("serve")
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("HOOKGATE_MASTER_KEY"), "{err}");
    }
}

#[tokio::test]
async fn a_config_file_is_read_and_the_environment_overrides_it() {
    let dir = std::env::temp_dir().join(format!("hg-cfg-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hookgate.toml");
    std::fs::write(&file, "log_format = \"yaml\"\n").unwrap();
    let key = MasterKey::generate_base64();
    let env = [("DATABASE_URL", "postgres://x@127.0.0.1:1/x"), ("HOOKGATE_MASTER_KEY", key.as_str())];
    let out = hookgate(&env).args(["--config", file.to_str().unwrap(), "serve"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HOOKGATE_LOG_FORMAT"));
}

#[tokio::test]
async fn the_tenant_cli_creates_a_tenant_whose_key_works() {
    let app = TestApp::spawn().await;
    let env: Vec<(&str, &str)> =
        ["DATABASE_URL", "HOOKGATE_MASTER_KEY"].iter().map(|k| (*k, app.env[*k].as_str())).collect();
    let out = hookgate(&env).args(["tenant", "create", "--name", "From CLI"]).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["name"], "From CLI");
    let key = created["apiKey"].as_str().unwrap();
    assert_eq!(app.api(key, Method::GET, "/api/v1/app").send().await.unwrap().status(), 200);
    let listed = hookgate(&env).args(["tenant", "list"]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("From CLI"));
    // The admin API's checks hold here too: a uid that reads as a tenant id is refused, nothing made.
    let out = hookgate(&env)
        .args(["tenant", "create", "--name", "Impostor", "--uid", "tnt_00000000000000000000000000"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`uid`"), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = hookgate(&env).args(["tenant", "list"]).output().await.unwrap();
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("Impostor"));
}

/// A database that admits an endpoint kind this release does not know (a newer
/// release admitted it): this one would take those endpoints for something else,
/// so it refuses to serve or migrate, naming the code.
#[tokio::test]
async fn a_process_refuses_a_database_that_admits_a_kind_it_does_not_know() {
    let db = TestDb::new().await;
    let client = db.client().await;
    let newer = hookgate_shared::status::EndpointKind::known_up_to() + 1;
    client.execute("INSERT INTO endpoint_kinds (code, name) VALUES ($1, 'fromTheFuture')", &[&newer]).await.unwrap();
    let key = MasterKey::generate_base64();
    let env =
        [("DATABASE_URL", db.url.as_str()), ("HOOKGATE_MASTER_KEY", key.as_str()), ("HOOKGATE_LISTEN", "127.0.0.1:0")];
    for args in [&["serve"][..], &["serve", "--migrate"], &["migrate"]] {
        let run = tokio::time::timeout(std::time::Duration::from_secs(30), hookgate(&env).args(args).output())
            .await
            .expect("it refuses at once")
            .unwrap();
        let said = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(!run.status.success() && said.contains(&format!("code {newer}")), "{args:?}: {said}");
    }
}
