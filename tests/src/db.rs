//! A fresh database per test, cloned from a template migrated once per suite run.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

const TEMPLATE: &str = "hookgate_template";
/// Serialises template creation and cloning across test processes.
const LOCK_KEY: i64 = 0x7465_7374_6462; // "testdb"

/// The URL of the shared test cluster's `hookgate` database, from `make test`.
pub fn base_url() -> String {
    std::env::var("HOOKGATE_TEST_DATABASE_URL")
        .expect("HOOKGATE_TEST_DATABASE_URL is unset: run the suite with `make test`")
}

/// `url` with its database name replaced.
pub fn with_database(url: &str, db: &str) -> String {
    let (server, _) = url.rsplit_once('/').expect("a database URL ends in /<name>");
    format!("{server}/{db}")
}

pub async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(conn);
    client
}

/// One test's own database. One made by [`TestDb::new`] or [`TestDb::empty`] is
/// dropped when its last clone goes: a suite run makes some two hundred, about
/// 12 MB each, and a CI machine's disk may be small.
#[derive(Clone)]
pub struct TestDb {
    pub name: String,
    pub url: String,
    _dropper: Option<Arc<Dropper>>,
}

impl TestDb {
    /// A migrated database nobody else uses.
    pub async fn new() -> Self {
        Self::create(true).await
    }

    /// An empty database, for testing migrations themselves.
    pub async fn empty() -> Self {
        Self::create(false).await
    }

    async fn create(migrated: bool) -> Self {
        let base = base_url();
        let admin = connect(&with_database(&base, "postgres")).await;
        let name = format!("t_{}", ulid::Ulid::new().to_string().to_lowercase());
        admin.execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY]).await.unwrap();
        if migrated {
            ensure_template(&admin, &base).await;
            clone_template(&admin, &name).await;
        } else {
            admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        }
        admin.execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY]).await.unwrap();
        let dropper = Arc::new(Dropper { admin_url: with_database(&base, "postgres"), name: name.clone() });
        TestDb { url: with_database(&base, &name), name, _dropper: Some(dropper) }
    }

    /// A database the test made itself, on a server of its own: never dropped here
    /// (the server's directory goes with it).
    pub fn on(name: &str, url: &str) -> Self {
        TestDb { name: name.into(), url: url.into(), _dropper: None }
    }

    pub async fn client(&self) -> Client {
        connect(&self.url).await
    }
}

async fn ensure_template(admin: &Client, base: &str) {
    let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&TEMPLATE]).await.unwrap();
    if exists.is_none() {
        admin.batch_execute(&format!("CREATE DATABASE {TEMPLATE}")).await.unwrap();
    }
    // Migrating each time is cheap when nothing is pending, and keeps a template
    // left by an earlier run up to date, its contracts included: no process of an
    // older release ever uses the template.
    let (mut client, conn) = tokio_postgres::connect(&with_database(base, TEMPLATE), NoTls).await.unwrap();
    let task = tokio::spawn(conn);
    use hookgate_shared::migrate::{self, Contracts, Switch};
    migrate::run_list(&mut client, migrate::MIGRATIONS, None, Switch::Hold, Contracts::Apply)
        .await
        .expect("migrations apply to the template");
    // And its endpoint kinds, which a release admits without a migration.
    hookgate_shared::store::endpoint_kinds::admit(&client).await.expect("the template admits its kinds");
    drop(client);
    let _ = task.await;
}

async fn clone_template(admin: &Client, name: &str) {
    // The template's last connection may take a moment to go away after closing.
    for attempt in 0.. {
        match admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {TEMPLATE}")).await {
            Ok(()) => return,
            Err(e) if attempt < 100 && e.to_string().contains("being accessed by other users") => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await
            }
            Err(e) => panic!("cannot clone the template database: {e}"),
        }
    }
}

/// Drops a test's database when the last handle on it goes, whether the test passed
/// or panicked. The test's own connections (an in-process gateway's pool, a child
/// process) may still be open, so `WITH (FORCE)` ends them. Bounded: a database that
/// cannot be dropped in time is left for the stack's next reset.
struct Dropper {
    admin_url: String,
    name: String,
}

impl Drop for Dropper {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        // A runtime of its own on a thread of its own: `drop` may run inside the
        // test's runtime, which must not be blocked on from within.
        // `Builder`: a thread the system refuses is an error here, not a panic (which,
        // during a failing test's unwinding, would abort the whole run).
        let dropping = std::thread::Builder::new().name("drop-test-db".into()).spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async {
                let work = async {
                    let (client, conn) = tokio_postgres::connect(&url, NoTls).await.ok()?;
                    tokio::spawn(conn);
                    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ok()
                };
                tokio::time::timeout(Duration::from_secs(10), work).await.ok().flatten()
            })
        });
        if let Ok(dropping) = dropping {
            let _ = dropping.join();
        }
    }
}

/// Makes the inbound events that `filter` (an SQL condition on `inbound_events`)
/// selects `days` old, as if received then: their ids too, which retention reads
/// (ids are made when an event is received), and their keys. Makes that day's
/// partition if there is none.
pub async fn age_inbound_events(db: &Client, filter: &str, days: i64) {
    use hookgate_shared::store::partitions;
    let at = chrono::Utc::now() - chrono::Duration::days(days);
    let family = partitions::family("inbound_events").expect("inbound_events is partitioned");
    let list = partitions::list(db).await.expect("partitions listed");
    let covered = list.iter().any(|p| p.family == family.table && p.from.is_none_or(|f| f <= at) && at < p.to);
    if !covered {
        let day = partitions::day_of(at);
        partitions::create(db, family, day, day + chrono::Duration::days(1)).await.expect("partition made");
    }
    let sql = format!(
        "WITH old AS (
            SELECT tenant_id, source_id, id, row_number() OVER () AS n FROM inbound_events WHERE {filter}
         ), moved AS (
            UPDATE inbound_events e SET received_at = $1::timestamptz,
                id = hookgate_id_floor('evt', $1::timestamptz - old.n * interval '1 ms')
            FROM old WHERE e.tenant_id = old.tenant_id AND e.source_id = old.source_id AND e.id = old.id
            RETURNING old.id AS was, e.id AS id
         )
         UPDATE inbound_keys k SET received_at = $1, event_id = moved.id
         FROM moved WHERE k.event_id = moved.was"
    );
    db.execute(&sql, &[&at]).await.expect("inbound events aged");
}

/// Migrates a new database as this release finds one whose contracts from
/// `first` (a number, `"0045"`) on have not run yet: every expand step applied
/// (this release's processes refuse to start without them), those contracts
/// held, the ones before applied.
pub async fn migrate_holding_contracts_from(db: &mut Client, first: &str) {
    use hookgate_shared::migrate::{self, Contracts, Switch, CONTRACT, MIGRATIONS};
    let held: Vec<(&'static str, &'static str)> =
        MIGRATIONS.iter().copied().filter(|(v, sql)| !(&v[..4] >= first && sql.starts_with(CONTRACT))).collect();
    let list: &'static [(&'static str, &'static str)] = Box::leak(held.into_boxed_slice());
    migrate::run_list(db, list, None, Switch::Apply, Contracts::Apply).await.expect("the expand steps apply");
}
