//! Contract migrations applied by the fleet itself, once the previous release
//! has gone: the last step of an expand/contract upgrade, with no operator step.
//!
//! Every process announces the schema level it knows in its connections'
//! `application_name` (`hookgate/0044`; the releases before this gave plain
//! `hookgate`, or the operator's own name from `DATABASE_URL`, read as level 0). A pending contract (`-- hookgate:contract`) is applied by a
//! worker when, for `HOOKGATE_CONTRACT_GRACE_SECS` on end, no connection to this
//! database names a Hookgate that knows less than the contract: Postgres itself
//! says who is connected, so a process that crashed without a goodbye is gone
//! when its connections are. The looks are samples (one a prune interval), so
//! the grace covers a process of the previous release that holds no connection
//! at the moment of a look (pools keep theirs, and a worker its LISTEN, so such
//! a moment is short). Only the first pending contract is applied at a time; a
//! release's contracts come after all its expand steps.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::{
    db,
    migrate::{self, Contracts, Switch, CONTRACT},
    store::{endpoint_kinds, StoreError},
    AppState,
};

/// How long no older process has been seen before one contract (or a new
/// endpoint kind's admission), as one worker watched.
#[derive(Debug, Default)]
pub struct Watch {
    contract: Option<&'static str>,
    clear_since: Option<Instant>,
    kinds_clear_since: Option<Instant>,
}

/// The level an `application_name` announces: a `hookgate/NNNN` word anywhere
/// in it (a pooler may add to the name); `0000` for one of `bare`, the names the
/// releases before levels gave (`hookgate`, or the operator's own from
/// `DATABASE_URL`); `None` for what is not Hookgate's.
fn announced<'a>(name: &'a str, bare: &[&str]) -> Option<&'a str> {
    if bare.contains(&name) {
        return Some("0000");
    }
    name.split_whitespace()
        .filter_map(|w| w.strip_prefix("hookgate/"))
        .find(|level| level.len() == 4 && level.bytes().all(|b| b.is_ascii_digit()))
}

/// The connections to this database (other than `client`'s) of Hookgate
/// processes that know fewer migrations than `version` (`"0045_…"`): their
/// `application_name`s. `bare`: the names the releases before levels gave.
pub async fn older_connected(client: &Client, version: &str, bare: &[&str]) -> Result<Vec<String>, StoreError> {
    let needed = &version[..4.min(version.len())];
    let names = migrate::connected_names(client).await?;
    Ok(names.into_iter().filter(|name| announced(name, bare).is_some_and(|level| level < needed)).collect())
}

/// The highest endpoint kind code a Hookgate connection's `application_name`
/// says its process knows (`kinds/8`); 8 for a Hookgate that says none (the
/// releases before kinds were announced knew codes up to 8); `None` for a
/// connection that is not Hookgate's.
fn kinds_known(name: &str, bare: &[&str]) -> Option<i16> {
    announced(name, bare)?;
    let said = name.split_whitespace().find_map(|w| w.strip_prefix(migrate::KINDS_TAG)?.parse().ok());
    Some(said.unwrap_or(8))
}

/// The connections (other than `client`'s) of Hookgate processes that do not
/// know the endpoint kind `code`: their `application_name`s.
pub async fn unaware_connected(client: &Client, code: i16, bare: &[&str]) -> Result<Vec<String>, StoreError> {
    let names = migrate::connected_names(client).await?;
    Ok(names.into_iter().filter(|name| kinds_known(name, bare).is_some_and(|known| known < code)).collect())
}

/// One look for this release's endpoint kinds the database does not admit yet:
/// they are admitted once no process unaware of them has been connected for
/// `grace`, as `watch` has seen it (a contract's rule: such a process would take
/// a row of a new kind for an HTTP endpoint). Whether it admitted any.
pub async fn admit_kinds(
    client: &Client,
    bare: &[&str],
    watch: &mut Watch,
    grace: Duration,
) -> Result<bool, StoreError> {
    let Some(&newest) = endpoint_kinds::missing(client).await?.last() else {
        watch.kinds_clear_since = None;
        return Ok(false);
    };
    let unaware = unaware_connected(client, newest, bare).await?;
    if !unaware.is_empty() {
        watch.kinds_clear_since = None;
        tracing::info!(kind = newest, connected = ?unaware, "a new endpoint kind waits for the previous release to go");
        return Ok(false);
    }
    let since = *watch.kinds_clear_since.get_or_insert_with(Instant::now);
    if since.elapsed() < grace || !unaware_connected(client, newest, bare).await?.is_empty() {
        return Ok(false);
    }
    endpoint_kinds::admit(client).await?;
    watch.kinds_clear_since = None;
    tracing::info!(kind = newest, "admitted new endpoint kinds: no process of an older release is connected");
    Ok(true)
}

/// The names the releases before levels gave their connections: `hookgate`,
/// or the operator's own name from `url`.
pub fn bare_names(url: &str) -> Vec<String> {
    let mut names = vec!["hookgate".to_owned()];
    if let Some(given) = db::target(url).ok().and_then(|(c, _)| c.get_application_name().map(str::to_owned)) {
        names.push(given);
    }
    names
}

/// The first migration of `list` not yet applied, if it is a contract: what a
/// run stops at, once every expand step before it is in.
async fn pending_contract(
    client: &Client,
    list: &'static [(&'static str, &'static str)],
) -> Result<Option<&'static str>, StoreError> {
    let done = migrate::applied(client).await?;
    if done.is_empty() {
        return Ok(None);
    }
    Ok(list.iter().find(|(v, _)| !done.contains(*v)).filter(|(_, sql)| sql.starts_with(CONTRACT)).map(|(v, _)| *v))
}

/// One look: applies the first pending contract of `list` (only it: the next
/// is looked at on its own) once no older process has been connected for
/// `grace`, as `watch` has seen it; what it applied. The check is made again
/// under the migration lock, and the contract's statements wait at most 5 s for
/// a lock (a long transaction on its table makes it wait for the next look, not
/// every query on that table behind it).
pub async fn step(
    client: &mut Client,
    list: &'static [(&'static str, &'static str)],
    bare: &[&str],
    watch: &mut Watch,
    grace: Duration,
) -> Result<Vec<&'static str>, StoreError> {
    let Some(contract) = pending_contract(client, list).await? else {
        (watch.contract, watch.clear_since) = (None, None);
        return Ok(Vec::new());
    };
    if watch.contract != Some(contract) {
        (watch.contract, watch.clear_since) = (Some(contract), None);
    }
    let older = older_connected(client, contract, bare).await?;
    if !older.is_empty() {
        watch.clear_since = None;
        tracing::info!(contract, connected = ?older, "a contract migration waits for the previous release to go");
        return Ok(Vec::new());
    }
    let since = *watch.clear_since.get_or_insert_with(Instant::now);
    if since.elapsed() < grace {
        return Ok(Vec::new());
    }
    if !migrate::try_lock(client).await? {
        return Ok(Vec::new());
    }
    let applied = async {
        if !older_connected(client, contract, bare).await?.is_empty() {
            return Ok(Vec::new());
        }
        // The session's lock is taken again inside (advisory locks stack).
        let outcome = migrate::run_list(client, list, Some(contract), Switch::Hold, Contracts::Apply).await?;
        Ok::<_, StoreError>(outcome.applied)
    }
    .await;
    let unlocked = migrate::unlock(client).await;
    let applied = applied?;
    unlocked?;
    for v in &applied {
        tracing::info!(version = v, "applied a contract migration: no process of an older release is connected");
    }
    (watch.contract, watch.clear_since) = (None, None);
    Ok(applied)
}

/// The workers' loop: a look every prune interval for as long as the process runs.
pub async fn run(state: AppState) {
    let grace = state.config.contract_grace;
    let bare = bare_names(&state.config.database_url);
    let bare: Vec<&str> = bare.iter().map(String::as_str).collect();
    let mut watch = Watch::default();
    let mut tick = crate::prune::ticks(&state);
    loop {
        tick.tick().await;
        let looked = async {
            let (mut client, connection) = db::connect(&state.config.database_url, state.config.db_timeout).await?;
            let driver = tokio::spawn(connection);
            let applied = step(&mut client, migrate::MIGRATIONS, &bare, &mut watch, grace).await;
            let admitted = admit_kinds(&client, &bare, &mut watch, grace).await;
            drop(client);
            let _ = driver.await;
            applied.and(admitted)
        };
        if let Err(e) = looked.await {
            // A look that failed saw nothing: the grace starts again from the next one.
            watch = Watch::default();
            tracing::warn!(error = %e, "could not look for contract migrations; trying again next round");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_announces_its_level_or_is_not_hookgates() {
        let bare = ["hookgate", "billing"];
        assert_eq!(announced("hookgate", &bare), Some("0000"), "a release before levels");
        assert_eq!(announced("billing", &bare), Some("0000"), "one before levels, named by the operator");
        assert_eq!(announced("hookgate/0044", &bare), Some("0044"));
        assert_eq!(announced("hookgate/0044 billing", &bare), Some("0044"), "before the operator's own name");
        assert_eq!(announced("hookgate/0044 - 10.0.0.5:41234", &bare), Some("0044"), "a pooler's suffix");
        assert_eq!(announced("hookgate-destination", &bare), None);
        assert_eq!(announced("psql", &bare), None);
        assert_eq!(announced("hookgate/44", &bare), None);
        let (level, kinds) = (migrate::level(), crate::status::EndpointKind::known_up_to());
        assert_eq!(migrate::application_name(None), format!("hookgate/{level} kinds/{kinds}"));
        assert_eq!(migrate::application_name(Some("x")), format!("hookgate/{level} kinds/{kinds} x"));
        assert_eq!(announced(&migrate::application_name(Some("x")), &bare), Some(level));
    }

    #[test]
    fn a_name_announces_the_kinds_its_process_knows_and_one_that_says_none_knows_the_first_nine() {
        let bare = ["hookgate"];
        assert_eq!(kinds_known("hookgate/0049 kinds/12 billing", &bare), Some(12));
        assert_eq!(
            kinds_known(&migrate::application_name(None), &bare),
            Some(crate::status::EndpointKind::known_up_to())
        );
        assert_eq!(kinds_known("hookgate/0048", &bare), Some(8), "a release before kinds were announced");
        assert_eq!(kinds_known("hookgate", &bare), Some(8));
        assert_eq!(kinds_known("hookgate/0049 kinds/x", &bare), Some(8), "a word that is no number says nothing");
        assert_eq!(kinds_known("psql kinds/99", &bare), None, "not Hookgate's");
    }
}
