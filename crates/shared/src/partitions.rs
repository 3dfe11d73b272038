//! Partition maintenance: every process keeps the partitions of the coming days
//! made (a row whose day has no partition could not be written); worker
//! processes also drop the partitions whose every row is past retention.
//!
//! One advisory lock serialises the maintenance of all processes, so two never
//! attach or detach at once; a process that finds it taken skips its round. A
//! failure is counted, logged once per round, and tried again next round: with a
//! week of partitions made ahead, a few failed rounds change nothing.

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
/// many it made, or `None` if another process holds the maintenance lock.
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
        let mut made = Vec::new();
        for family in &FAMILIES {
            made.push((family.table, partitions::ensure(&tx, family, from, until, c.partition_days.into()).await?));
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

/// Whether a partition's every row is past its family's horizon at `now`.
fn expired(p: &Partition, family: &Family, horizons: (i32, i32), now: DateTime<Utc>) -> bool {
    let days = match family.horizon {
        Horizon::Inbound => horizons.0,
        Horizon::Messages => horizons.1,
    };
    p.to + Days::days(days.into()) <= now
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
    let (client, connection) = tokio::time::timeout(c.db_timeout, db::connect(&c.database_url))
        .await
        .map_err(|_| StoreError::Unavailable("connecting for partition maintenance timed out".into()))??;
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
            let rows = partition_export::rows(client, family, name).await?;
            let m = archive.write(family, name, bounds, rows).await?;
            tracing::info!(partition = %name, rows = m.rows, bytes = m.bytes, "archived a partition before its drop");
        }
    }
    partitions::drop_table(client, name).await?;
    Ok(())
}

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
                if family.table == "messages" {
                    // The eventIds of its messages: a narrow table, in bounded batches.
                    let below = crate::ids::floor(family.prefix, p.to);
                    while retention::prune_event_ids_below(client, &below, crate::prune::BATCH).await?
                        == crate::prune::BATCH as u64
                    {}
                }
            }
        }
        for name in partitions::detached_leftovers(client).await? {
            let (family, from, to) = match partition_export::labelled(client, &name).await? {
                Some((family, from, to)) => (family, from, Some(to)),
                None => (name.rsplit_once('_').map(|(f, _)| f.to_owned()).unwrap_or_default(), None, None),
            };
            archive_and_drop(client, archive, &family, &name, (from, to)).await?;
            tracing::info!(partition = %name, "dropped a partition an interrupted round had detached");
        }
        Ok::<_, ArchiveError>(dropped)
    }
    .await;
    let _ = partitions::unlock_session(client).await;
    result
}

/// Samples the partitions gauge.
pub async fn observe(state: &AppState) -> Option<Vec<Partition>> {
    let list = db::bounded(state.db_budget(), async {
        let conn = db::conn(&state.db).await?;
        partitions::list(&**conn).await
    })
    .await
    .ok()?;
    for family in &FAMILIES {
        let n = list.iter().filter(|p| p.family == family.table).count();
        state.metrics.partitions.with_label_values(&[family.table]).set(n as i64);
    }
    Some(list)
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
        if drops {
            if let Err(e) = drop_expired(&state).await {
                state.metrics.partition_errors.inc();
                tracing::warn!(error = %e, "dropping old partitions failed; trying again next round");
            }
        }
    }
}
