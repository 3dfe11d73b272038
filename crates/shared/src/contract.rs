//! Contract migrations applied by the fleet itself, once the previous release
//! has gone: the last step of an expand/contract upgrade, with no operator step.
//!
//! Every process announces the schema level it knows in its connections'
//! `application_name` (`hookgate/0044`; a release before this announced plain
//! `hookgate`). A pending contract (`-- hookgate:contract`) is applied by a
//! worker when, for `HOOKGATE_CONTRACT_GRACE_SECS` on end, no connection to this
//! database names a Hookgate that knows less than the contract: Postgres itself
//! says who is connected, so a process that crashed without a goodbye is gone
//! when its connections are. The grace covers a process of the previous release
//! that holds no connection at the moment it is looked for (pools keep theirs,
//! and a worker its LISTEN, so such a moment is short).

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::{
    db,
    migrate::{self, Contracts, Switch, CONTRACT},
    store::StoreError,
    AppState,
};

/// How long no older process has been seen, as one worker watched.
#[derive(Debug, Default)]
pub struct Watch {
    clear_since: Option<Instant>,
}

/// The `application_name` a process of this release gives its connections:
/// `given` (the operator's, from `DATABASE_URL`) with Hookgate's level after it.
pub fn application_name(given: Option<&str>) -> String {
    let tag = format!("hookgate/{}", migrate::level());
    match given {
        Some(g) => format!("{g} {tag}"),
        None => tag,
    }
}

/// The level an `application_name` announces: `Some("0000")` for a release
/// before levels (plain `hookgate`), `None` for what is not Hookgate's.
fn announced(name: &str) -> Option<&str> {
    if name == "hookgate" {
        return Some("0000");
    }
    let level = name.rsplit(' ').next()?.strip_prefix("hookgate/")?;
    (level.len() == 4 && level.bytes().all(|b| b.is_ascii_digit())).then_some(level)
}

/// The connections to this database (other than `client`'s) of Hookgate
/// processes that know fewer migrations than `version` (`"0045_…"`): their
/// `application_name`s.
pub async fn older_connected(client: &Client, version: &str) -> Result<Vec<String>, StoreError> {
    let rows = client
        .query(
            "SELECT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE '%hookgate%'",
            &[],
        )
        .await?;
    let needed = &version[..4.min(version.len())];
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|name| announced(name).is_some_and(|level| level < needed))
        .collect())
}

/// The first migration of `list` not yet applied, if it is a contract: what a
/// run stops at, once every expand step before it is in.
async fn pending_contract(
    client: &Client,
    list: &'static [(&'static str, &'static str)],
) -> Result<Option<&'static str>, StoreError> {
    let table: bool = client.query_one("SELECT to_regclass('hookgate_migrations') IS NOT NULL", &[]).await?.get(0);
    if !table {
        return Ok(None);
    }
    let done: std::collections::HashSet<String> =
        client.query("SELECT version FROM hookgate_migrations", &[]).await?.iter().map(|r| r.get(0)).collect();
    Ok(list.iter().find(|(v, _)| !done.contains(*v)).filter(|(_, sql)| sql.starts_with(CONTRACT)).map(|(v, _)| *v))
}

/// One look: applies the pending contracts of `list` if no older process has
/// been connected for `grace` (as `watch` has seen it); what it applied.
pub async fn step(
    client: &mut Client,
    list: &'static [(&'static str, &'static str)],
    watch: &mut Watch,
    grace: Duration,
) -> Result<Vec<&'static str>, StoreError> {
    let Some(contract) = pending_contract(client, list).await? else {
        watch.clear_since = None;
        return Ok(Vec::new());
    };
    let older = older_connected(client, contract).await?;
    if !older.is_empty() {
        watch.clear_since = None;
        tracing::debug!(contract, connected = ?older, "a contract waits for the previous release to go");
        return Ok(Vec::new());
    }
    let since = *watch.clear_since.get_or_insert_with(Instant::now);
    if since.elapsed() < grace {
        return Ok(Vec::new());
    }
    let outcome = migrate::run_list(client, list, None, Switch::Hold, Contracts::Apply).await?;
    for v in &outcome.applied {
        tracing::info!(version = v, "applied a contract migration: no process of an older release is connected");
    }
    Ok(outcome.applied)
}

/// The workers' loop: a look every prune interval for as long as the process runs.
pub async fn run(state: AppState) {
    let grace = state.config.contract_grace;
    let mut watch = Watch::default();
    let mut tick = crate::prune::ticks(&state);
    loop {
        tick.tick().await;
        let looked = async {
            let (mut client, connection) = db::connect(&state.config.database_url, state.config.db_timeout).await?;
            let driver = tokio::spawn(connection);
            let applied = step(&mut client, migrate::MIGRATIONS, &mut watch, grace).await;
            drop(client);
            let _ = driver.await;
            applied
        };
        if let Err(e) = looked.await {
            tracing::warn!(error = %e, "could not look for contract migrations; trying again next round");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_announces_its_level_or_is_not_hookgates() {
        assert_eq!(announced("hookgate"), Some("0000"), "a release before levels");
        assert_eq!(announced("hookgate/0044"), Some("0044"));
        assert_eq!(announced("billing-db hookgate/0044"), Some("0044"), "after the operator's own name");
        assert_eq!(announced("hookgate-destination"), None);
        assert_eq!(announced("psql"), None);
        assert_eq!(announced("hookgate/44"), None);
        assert_eq!(application_name(None), format!("hookgate/{}", migrate::level()));
        assert_eq!(application_name(Some("x")), format!("x hookgate/{}", migrate::level()));
    }
}
