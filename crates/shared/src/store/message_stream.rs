//! An application's messages as a stream (Svix's `v1.message.events` and
//! `v1.events.stream`): read in the order their transactions began, and only
//! below the horizon of transactions still open, so a reader never passes a
//! message that commits later.
//!
//! Why this is exact without a column of its own: a message's `created_at` is
//! `now()`, the start of the transaction that inserts it, and Postgres shows the
//! start of every open transaction in `pg_stat_activity.xact_start`. The horizon
//! is read first, in a statement of its own; the page is read by a later
//! statement, so with a later snapshot. A message created before the horizon was
//! in a transaction that had ended when the horizon was read (else the horizon
//! would be at most its start), so the page sees it if it ever commits. A
//! margin covers the instant between a server process stamping a transaction's
//! start and publishing it.

use chrono::{DateTime, TimeZone, Utc};
use tokio_postgres::GenericClient;

use super::messages::{from_row, Message, COLUMNS};
use super::StoreError;
use crate::ids::{AppId, TenantId};

/// The tag of a test event (`send-example`): a customer chooses its payload, so it
/// is not one of the tenant's events, and the streams leave it out.
pub const TEST_EVENT_TAG: &str = "hookgate.test-event";

/// A place in a stream: after the message (`at`, `id`). The start is before all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPosition {
    pub at: DateTime<Utc>,
    pub id: String,
}

impl StreamPosition {
    /// Before every message.
    pub fn start() -> StreamPosition {
        StreamPosition { at: Utc.timestamp_opt(0, 0).single().expect("the epoch"), id: String::new() }
    }

    /// Before the first message created after `t`.
    pub fn after(t: DateTime<Utc>) -> StreamPosition {
        // Times are kept to the microsecond: `created_at > t` is `created_at >=
        // t + 1 µs`, and every id sorts after the empty one.
        StreamPosition { at: t + chrono::Duration::microseconds(1), id: String::new() }
    }

    /// The iterator the API gives out: `{microseconds since the epoch}.{message id}`.
    pub fn iterator(&self) -> String {
        format!("{}.{}", self.at.timestamp_micros(), self.id)
    }

    /// An iterator read back; `None` if it is not one this server gave out.
    pub fn parse(s: &str) -> Option<StreamPosition> {
        let (micros, id) = s.split_once('.')?;
        let micros: i64 = micros.parse().ok().filter(|m| *m >= 0)?;
        let id_ok = id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !id_ok {
            return None;
        }
        Some(StreamPosition { at: Utc.timestamp_micros(micros).single()?, id: id.to_owned() })
    }
}

/// Where a stream may be read up to, or why it must wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// Messages created before this have all committed or aborted.
    Below(DateTime<Utc>),
    /// A session whose transaction's start this role cannot see, or a prepared
    /// transaction, is open: nothing new is read until it ends.
    Unseen,
    /// `track_activities` is off: Postgres shows no transaction's start.
    Untracked,
}

/// How long a server process may take, at most, between stamping a
/// transaction's start and publishing it in `pg_stat_activity` (a few
/// instructions; the margin is for a process descheduled in between).
const STAMP_MARGIN_MS: i64 = 1000;

/// Reads the horizon. Must be its own statement, run before the page's.
///
/// Counted: every client session of this database in a transaction, by its
/// start. Background processes (autovacuum, the WAL sender) cannot insert
/// messages and are left out. A session whose start cannot be seen (another
/// role's, without `pg_read_all_stats`; one with `track_activities` off) and that
/// holds a transaction (its virtual transaction id's lock), or a prepared
/// transaction of this database (its start is no longer shown), pauses every
/// stream until it ends: either may insert a message stamped before any horizon.
/// `pg_locks` (which takes every lock-manager partition's lock) is read only when
/// such a session exists, since the conditions before it are false otherwise.
pub async fn horizon(db: &impl GenericClient) -> Result<Horizon, StoreError> {
    let row = db
        .query_one(
            "SELECT least(clock_timestamp(), min(a.xact_start) FILTER (WHERE a.backend_type = 'client backend'))
                        - make_interval(secs => $1::float8 / 1000) AS below,
                    current_setting('track_activities')::bool AS tracked,
                    count(*) FILTER (WHERE a.usesysid IS NOT NULL AND a.xact_start IS NULL
                        AND (a.state IS NULL OR a.state = 'disabled')
                        AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'virtualxid'))
                    + (SELECT count(*) FROM pg_prepared_xacts p WHERE p.database = current_database()) AS unseen
             FROM pg_stat_activity a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()",
            &[&(STAMP_MARGIN_MS as f64)],
        )
        .await?;
    Ok(if !row.get::<_, bool>("tracked") {
        Horizon::Untracked
    } else if row.get::<_, i64>("unseen") > 0 {
        Horizon::Unseen
    } else {
        Horizon::Below(row.get("below"))
    })
}

/// Which messages a stream answers.
#[derive(Debug, Clone, Default)]
pub struct StreamFilter {
    pub event_types: Option<Vec<String>>,
    /// Messages with any of these channels.
    pub channels: Option<Vec<String>>,
}

/// What a page read: the messages found, where the next read goes on from, and
/// whether it came to the horizon.
#[derive(Debug)]
pub struct StreamPage {
    pub found: Vec<Message>,
    pub next: StreamPosition,
    pub done: bool,
}

/// Up to `limit` messages of the application after `from` and below `below`,
/// looking at no more than `scan` of the tenant's messages (the index is by
/// tenant and time), so a page of a quiet application among busy ones is
/// bounded: it answers what it found and where it stopped.
#[allow(clippy::too_many_arguments)]
pub async fn read(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    from: &StreamPosition,
    below: DateTime<Utc>,
    filter: &StreamFilter,
    limit: usize,
    scan: i64,
) -> Result<StreamPage, StoreError> {
    // Payloads are read only for the messages answered (`hit`).
    let cols = COLUMNS.replace("payload", "CASE WHEN hit THEN payload END AS payload");
    let sql = format!(
        r#"SELECT hit, {cols} FROM (
            SELECT *, COALESCE(app_id = $2
                      AND ($6::text[] IS NULL OR event_type = ANY ($6))
                      AND ($7::text[] IS NULL OR channels && $7)
                      AND NOT COALESCE(tags @> ARRAY[$9::text], false), false) AS hit
            FROM messages
            WHERE tenant_id = $1 AND created_at >= $3 AND (created_at, id COLLATE "C") > ($3, $4) AND created_at < $5
            ORDER BY created_at, id COLLATE "C" LIMIT $8) s
         ORDER BY created_at, id COLLATE "C""#
    );
    let rows = db
        .query(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &from.at,
                &from.id,
                &below,
                &filter.event_types,
                &filter.channels,
                &scan,
                &TEST_EVENT_TAG,
            ],
        )
        .await?;
    let mut found = Vec::new();
    let mut next = from.clone();
    let mut consumed = 0;
    for r in &rows {
        if found.len() == limit {
            break;
        }
        consumed += 1;
        let m = from_row(r);
        next = StreamPosition { at: m.created_at, id: m.id.to_string() };
        if r.get::<_, bool>("hit") {
            found.push(m);
        }
    }
    let done = consumed == rows.len() && (rows.len() as i64) < scan;
    Ok(StreamPage { found, next, done })
}
