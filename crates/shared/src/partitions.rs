//! Partition maintenance: every process keeps the partitions of the coming days
//! made (a row whose day has no partition could not be written); worker
//! processes also drop the partitions whose every row is past retention.
//!
//! Two advisory locks serialise the maintenance of all processes: one for making
//! partitions, one for dropping them, so that a long detach or archive never holds
//! up the making; a process that finds one taken skips that part of its round.
//! (An attach and a detach of one table wait for each other in Postgres.) A
//! failure is counted, logged once per round, and tried again next round: with a
//! week of partitions made ahead, a few failed rounds change nothing; the
//! `hookgate_partitions_ahead_seconds` gauge says how much time is left.

use chrono::{DateTime, Duration as Days, Utc};

use crate::{
    archive::{Archive, ArchiveError},
    db,
    store::{
        partition_export,
        partitions::{self, Family, Horizon, Partition, FAMILIES},
        retention, StoreError,
    },
    AppState,
};

/// Makes the partitions of the coming `HOOKGATE_PARTITION_AHEAD_DAYS`, and of
/// the last two days should a gap have opened while no process ran. Returns how
/// many it made, or `None` if another process is making them. (Its lock is not
/// the one of the drops: a long archive export never holds up this.)
pub async fn ensure_ahead(state: &AppState) -> Result<Option<u32>, StoreError> {
    let c = &state.config;
    let now = Utc::now();
    let (from, until) = (now - Days::days(2), now + Days::days(c.partition_ahead_days.into()));
    let made = db::bounded(state.db_budget() * 4, async {
        let mut conn = db::conn(&state.db).await?;
        let client: &mut tokio_postgres::Client = &mut conn;
        let tx = client.transaction().await?;
        // Attaching waits for no reader or writer, only for another attach or
        // detach; it gives up soon rather than queue behind one.
        if !partitions::lock_for_attach(&tx).await? {
            return Ok(None);
        }
        let horizons = partitions::horizons(&tx, c.retention_inbound_days, c.retention_message_days).await?;
        let mut made = Vec::new();
        for family in &FAMILIES {
            let days = width(c.partition_days, horizon_of(family, horizons), c.partition_ahead_days);
            made.push((family.table, partitions::ensure(&tx, family, from, until, days).await?));
        }
        tx.commit().await?;
        Ok(Some(made))
    })
    .await?;
    let Some(made) = made else { return Ok(None) };
    let mut total = 0;
    for (family, n) in made {
        state.metrics.partitions_created.with_label_values(&[family]).inc_by(n.into());
        total += n;
    }
    if total > 0 {
        tracing::info!(partitions = total, "made partitions ahead");
    }
    Ok(Some(total))
}

/// How many partitions a family keeps at most, about: every query that cannot
/// tell its partitions from its parameters plans (and locks) all of them.
const MOST_PARTITIONS: i64 = 32;

/// The width of the partitions to make: the setting, or wider when the horizon
/// is so long that the setting would make more than [`MOST_PARTITIONS`].
fn width(setting: i32, horizon_days: i32, ahead_days: i32) -> i64 {
    let span = i64::from(horizon_days) + i64::from(ahead_days);
    i64::from(setting).max((span + MOST_PARTITIONS - 1) / MOST_PARTITIONS)
}

fn horizon_of(family: &Family, horizons: (i32, i32)) -> i32 {
    match family.horizon {
        Horizon::Inbound => horizons.0,
        Horizon::Messages => horizons.1,
    }
}

/// Whether a partition's every row is past its family's horizon at `now`.
fn expired(p: &Partition, family: &Family, horizons: (i32, i32), now: DateTime<Utc>) -> bool {
    p.to + Days::days(horizon_of(family, horizons).into()) <= now
}

/// Detaches and drops every partition past its horizon, children before the
/// messages they hang under, and finishes what an interrupted round left (a
/// detach pending, a detached table not dropped). With `HOOKGATE_ARCHIVE_URL`,
/// a partition is archived after its detach and dropped only once its archive
/// is complete; a failed archive keeps the table for the next round. Runs on a
/// connection of its own: detaching waits for the queries that may still read
/// the partition, longer than a request's statement bound allows. Returns how
/// many it dropped.
pub async fn drop_expired(state: &AppState) -> Result<u32, ArchiveError> {
    let c = &state.config;
    let archive = c.archive_url.as_deref().map(Archive::open).transpose()?;
    let (client, connection) = db::connect(&c.database_url, c.db_timeout).await?;
    let driver = tokio::spawn(connection);
    let result = drop_on(state, &client, archive.as_ref()).await;
    drop(client);
    let _ = driver.await;
    result
}

/// Archives (if there is an archive and it lacks it) and drops a detached table.
async fn archive_and_drop(
    client: &tokio_postgres::Client,
    archive: Option<&Archive>,
    family: &str,
    name: &str,
    bounds: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
) -> Result<(), ArchiveError> {
    if let Some(archive) = archive {
        if !archive.has(family, name).await? {
            // A big partition streams for longer than any statement bound; the
            // table is detached, so no one waits on it meanwhile.
            partitions::statement_bound(client, None).await?;
            let written = async {
                let rows = partition_export::rows(client, family, name).await?;
                archive.write(family, name, bounds, rows).await
            }
            .await;
            partitions::statement_bound(client, Some(DETACH_BOUND)).await?;
            let m = written?;
            tracing::info!(partition = %name, rows = m.rows, bytes = m.bytes, "archived a partition before its drop");
        }
    }
    partitions::drop_table(client, name).await?;
    Ok(())
}

/// How long a detach may wait for the queries that can still see its partition.
const DETACH_BOUND: std::time::Duration = std::time::Duration::from_secs(600);

async fn drop_on(
    state: &AppState,
    client: &tokio_postgres::Client,
    archive: Option<&Archive>,
) -> Result<u32, ArchiveError> {
    let c = &state.config;
    // A detach waits at most ten minutes for old queries; a lock it cannot get
    // soon is left for the next round.
    if !partitions::lock_for_detach(client).await? {
        return Ok(0);
    }
    let result = async {
        let horizons = partitions::horizons(client, c.retention_inbound_days, c.retention_message_days).await?;
        let now = partitions::now(client).await?;
        // A detach an earlier round left pending hides its rows and blocks every
        // other detach of its family: finish it first, whatever the horizon says
        // now, and attach the table again if its rows are no longer all expired
        // (a tenant's retention grew meanwhile).
        for p in partitions::list(client).await?.iter().filter(|p| p.detach_pending) {
            partitions::detach(client, p).await?;
            let family = partitions::family(p.family).expect("listed families are ours");
            if !expired(p, family, horizons, now) {
                partitions::reattach(client, family, p).await?;
                tracing::info!(partition = %p.name, "attached again a partition whose detach was left pending");
            }
        }
        let all = partitions::list(client).await?;
        let mut dropped = 0;
        for family in &FAMILIES {
            for p in all.iter().filter(|p| p.family == family.table && expired(p, family, horizons, now)) {
                // Its bounds go with the table, for a later round if this one dies.
                partition_export::label(client, &p.name, family.table, p.from, p.to).await?;
                partitions::detach(client, p).await?;
                archive_and_drop(client, archive, family.table, &p.name, (p.from, Some(p.to))).await?;
                state.metrics.partitions_dropped.with_label_values(&[family.table]).inc();
                tracing::info!(partition = %p.name, "dropped a partition past retention");
                dropped += 1;
            }
        }
        // Tables an interrupted round left detached (a crash, a failed archive, a
        // failed attach): dropped if their rows are still all expired, attached
        // again if a retention grew meanwhile. One without its label is left to the
        // operator: nothing says what it holds.
        for name in partitions::detached_leftovers(client).await? {
            let Some((table, from, to)) = partition_export::labelled(client, &name).await? else {
                tracing::warn!(table = %name, "a detached table without Hookgate's label; left alone");
                continue;
            };
            let Some(family) = partitions::family(&table) else { continue };
            let p = Partition { family: family.table, name: name.clone(), from, to, detach_pending: false };
            if expired(&p, family, horizons, now) {
                archive_and_drop(client, archive, family.table, &name, (from, Some(to))).await?;
                tracing::info!(partition = %name, "dropped a partition an interrupted round had detached");
            } else {
                partitions::reattach(client, family, &p).await?;
                tracing::info!(partition = %name, "attached again a partition a retention still covers");
            }
        }
        // The eventIds of messages below the oldest partition left: their messages
        // went with a partition (this round's or an interrupted one's). A narrow
        // table, in bounded batches.
        let oldest = partitions::list(client).await?.into_iter().find(|p| p.family == "messages");
        if let Some(from) = oldest.and_then(|p| p.from) {
            let below = crate::ids::floor("msg", from);
            while retention::prune_event_ids_below(client, &below, crate::prune::BATCH).await?
                == crate::prune::BATCH as u64
            {}
        }
        Ok::<_, ArchiveError>(dropped)
    }
    .await;
    let _ = partitions::unlock_session(client).await;
    result
}

/// Every partition, read within the database budget; `None` while Postgres is away.
pub async fn current(state: &AppState) -> Option<Vec<Partition>> {
    db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        partitions::list(&**conn).await
    })
    .await
    .ok()
}

/// Samples the partition gauges (how many, how far ahead).
pub async fn observe(state: &AppState) {
    let Some(list) = current(state).await else { return };
    let now = Utc::now();
    for family in &FAMILIES {
        let mine: Vec<&Partition> = list.iter().filter(|p| p.family == family.table).collect();
        state.metrics.partitions.with_label_values(&[family.table]).set(mine.len() as i64);
        if let Some(end) = mine.iter().map(|p| p.to).max() {
            let ahead = (end - now).num_seconds() as f64;
            state.metrics.partitions_ahead.with_label_values(&[family.table]).set(ahead);
        }
    }
}

/// The maintenance loop of a process: partitions made ahead every round, and,
/// with `drops`, old ones dropped.
pub async fn run(state: AppState, drops: bool) {
    let mut tick = crate::prune::ticks(&state);
    loop {
        tick.tick().await;
        if let Err(e) = ensure_ahead(&state).await {
            state.metrics.partition_errors.inc();
            tracing::warn!(error = %e, "making partitions ahead failed; trying again next round");
        }
        observe(&state).await;
        if drops {
            if let Err(e) = drop_expired(&state).await {
                state.metrics.partition_errors.inc();
                tracing::warn!(error = %e, "dropping old partitions failed; trying again next round");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_widen_when_a_long_retention_would_make_too_many() {
        assert_eq!(width(7, 90, 7), 7, "the setting, for the default horizon");
        assert_eq!(width(1, 30, 7), 2, "37 days in at most 32 partitions");
        assert_eq!(width(7, 3650, 7), 115, "ten years in about 32 partitions, not 522");
    }
}
