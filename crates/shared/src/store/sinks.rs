//! The sinks' log (`sink_log`): the messages of FIFO and polling endpoints in
//! order, read below the horizon of running transactions so none is skipped;
//! polling consumers' positions; a FIFO endpoint's progress, held by one runner
//! at a time (a lease fenced by a token).

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};

use super::StoreError;
use crate::{
    ids::{AppId, EndpointId, MessageId, TenantId},
    status::EndpointKind,
};

/// A place in a sink's log: after the row (xid, seq). `ZERO` is before every row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub xid: u64,
    pub seq: i64,
}

impl Position {
    pub const ZERO: Position = Position { xid: 0, seq: 0 };
    /// After every row there can be (an upper bound that bounds nothing).
    pub const LAST: Position = Position { xid: u64::MAX, seq: i64::MAX };

    /// The iterator the API gives out: `{xid}.{seq}`.
    pub fn iterator(self) -> String {
        format!("{}.{}", self.xid, self.seq)
    }

    /// An iterator read back; `None` if it is not one this gave out.
    pub fn parse(s: &str) -> Option<Position> {
        let (xid, seq) = s.split_once('.')?;
        Some(Position { xid: xid.parse().ok()?, seq: seq.parse().ok().filter(|s: &i64| *s >= 0)? })
    }

    /// From a row's `xid` (as text) and `seq` columns.
    fn from_row(r: &Row) -> Position {
        let xid: String = r.get("xid");
        Position { xid: xid.parse().unwrap_or(0), seq: r.get("seq") }
    }
}

/// One message of a sink's log, as it is read or sent.
#[derive(Debug, Clone)]
pub struct Logged {
    pub at: Position,
    pub msg_id: MessageId,
    pub event_id: Option<String>,
    pub event_type: String,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    /// `None` once its payload expired or was expunged.
    pub payload: Option<Vec<u8>>,
    pub content_type: String,
    pub created_at: DateTime<Utc>,
    pub logged_at: DateTime<Utc>,
}

/// What a FIFO turn read ([`scan`]): the messages still kept among the log rows
/// looked at, in order, and the last row looked at.
#[derive(Debug, Default)]
pub struct Scanned {
    pub found: Vec<Logged>,
    /// The last log row looked at (`None`: none, the log is drained below the horizon).
    pub looked_to: Option<Position>,
    /// How many log rows were looked at, kept messages or not.
    pub looked_at: i64,
}

/// Up to `limit` log rows of one sink (and key) after `after`, up to and
/// including `upto` (a held batch's end; [`Position::LAST`] for none), below the
/// horizon, with their messages where still kept. One statement, one snapshot:
/// rows whose messages are gone (a tenant's retention shorter than the log's) are
/// passed over with the batch they fell in, never by a second read that could
/// see, and pass, a row committed since the first.
#[allow(clippy::too_many_arguments)]
pub async fn scan(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    key: &str,
    after: Position,
    upto: Position,
    limit: i64,
) -> Result<Scanned, StoreError> {
    // No `$n IS NULL OR` in the conditions: this runs on the workers' pool of
    // generic plans (an upper bound is always given).
    let rows = db
        .query(
            "WITH scanned AS (
                SELECT l.tenant_id, l.app_id, l.xid, l.seq, l.msg_id, l.created_at FROM sink_log l
                WHERE l.tenant_id = $1 AND l.app_id = $2 AND l.endpoint_id = $3 AND l.key = $4
                  AND (l.xid, l.seq) > ($5::text::xid8, $6::bigint)
                  AND (l.xid, l.seq) <= ($7::text::xid8, $8::bigint)
                  AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY l.xid, l.seq LIMIT $9
             )
             SELECT s.xid::text AS xid, s.seq, m.id, m.event_id, m.event_type, m.channels, m.tags, m.payload,
                 COALESCE(m.content_type, 'application/json') AS content_type, m.created_at, s.created_at AS logged_at
             FROM scanned s
             LEFT JOIN messages m ON m.tenant_id = s.tenant_id AND m.app_id = s.app_id AND m.id = s.msg_id
             ORDER BY s.xid, s.seq",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &sink.as_str(),
                &key,
                &after.xid.to_string(),
                &after.seq,
                &upto.xid.to_string(),
                &upto.seq,
                &limit,
            ],
        )
        .await?;
    let looked_to = rows.last().map(Position::from_row);
    let found = rows.iter().filter(|r| r.get::<_, Option<String>>("id").is_some()).map(logged).collect();
    Ok(Scanned { found, looked_to, looked_at: rows.len() as i64 })
}

/// The rows of one sink after `after`, below the horizon, joined with their
/// messages (a message pruned since is left out). `$1..$3` name the sink.
const READ: &str = "SELECT l.xid::text AS xid, l.seq, m.id, m.event_id, m.event_type, m.channels, m.tags, m.payload,
        COALESCE(m.content_type, 'application/json') AS content_type, m.created_at, l.created_at AS logged_at
    FROM sink_log l
    JOIN messages m ON m.tenant_id = l.tenant_id AND m.app_id = l.app_id AND m.id = l.msg_id
    WHERE l.tenant_id = $1 AND l.app_id = $2 AND l.endpoint_id = $3 AND l.key = $9
      AND (l.xid, l.seq) > ($4::text::xid8, $5::bigint)
      AND l.xid < pg_snapshot_xmin(pg_current_snapshot())";

pub(super) fn logged(r: &Row) -> Logged {
    Logged {
        at: Position::from_row(r),
        msg_id: MessageId::from_db(r.get("id")),
        event_id: r.get("event_id"),
        event_type: r.get("event_type"),
        channels: r.get("channels"),
        tags: r.get("tags"),
        payload: r.get("payload"),
        content_type: r.get("content_type"),
        created_at: r.get("created_at"),
        logged_at: r.get("logged_at"),
    }
}

/// Up to `limit` messages of a sink (of one key: `''` for a polling endpoint or
/// an unkeyed FIFO one) after `after`, in order, filtered by event type and
/// channel when given.
#[allow(clippy::too_many_arguments)]
pub async fn read(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    key: &str,
    after: Position,
    limit: i64,
    event_type: Option<&str>,
    channel: Option<&str>,
) -> Result<Vec<Logged>, StoreError> {
    let sql = format!(
        "{READ}
           AND ($6::text IS NULL OR m.event_type = $6)
           AND ($7::text IS NULL OR $7 = ANY (m.channels))
         ORDER BY l.xid, l.seq LIMIT $8"
    );
    let rows = db
        .query(
            &sql,
            &[
                &tenant.as_str(),
                &app.as_str(),
                &sink.as_str(),
                &after.xid.to_string(),
                &after.seq,
                &event_type,
                &channel,
                &limit,
                &key,
            ],
        )
        .await?;
    Ok(rows.iter().map(logged).collect())
}

/// A filtered read: up to `limit` messages of a polling endpoint after `after`
/// that match the filters, looking at no more than `scan` log rows, and where the
/// look ended: a rare match in a long log is found page by page (empty pages that
/// move on), never by one unbounded scan.
#[allow(clippy::too_many_arguments)]
pub async fn read_filtered(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    after: Position,
    limit: i64,
    scan: i64,
    event_type: Option<&str>,
    channel: Option<&str>,
) -> Result<Filtered, StoreError> {
    let rows = db
        .query(
            "WITH scanned AS (
                SELECT l.tenant_id, l.app_id, l.xid, l.seq, l.msg_id, l.created_at FROM sink_log l
                WHERE l.tenant_id = $1 AND l.app_id = $2 AND l.endpoint_id = $3 AND l.key = ''
                  AND (l.xid, l.seq) > ($4::text::xid8, $5::bigint)
                  AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY l.xid, l.seq LIMIT $6
             )
             SELECT s.xid::text AS xid, s.seq, m.id, m.event_id, m.event_type, m.channels, m.tags, m.payload,
                 COALESCE(m.content_type, 'application/json') AS content_type, m.created_at, s.created_at AS logged_at,
                 COALESCE(m.id IS NOT NULL AND ($7::text IS NULL OR m.event_type = $7)
                     AND ($8::text IS NULL OR $8 = ANY (m.channels)), false) AS matched
             FROM scanned s
             LEFT JOIN messages m ON m.tenant_id = s.tenant_id AND m.app_id = s.app_id AND m.id = s.msg_id
             ORDER BY s.xid, s.seq",
            &[
                &tenant.as_str(),
                &app.as_str(),
                &sink.as_str(),
                &after.xid.to_string(),
                &after.seq,
                &scan,
                &event_type,
                &channel,
            ],
        )
        .await?;
    let scanned_all = (rows.len() as i64) < scan;
    let mut found = Vec::new();
    let mut looked_to = after;
    for r in &rows {
        if found.len() as i64 >= limit {
            // Full: go on from the last one found; more may follow.
            return Ok(Filtered { found, next: looked_to, done: false });
        }
        looked_to = Position::from_row(r);
        // A message gone (pruned) matches nothing.
        if r.get::<_, Option<bool>>("matched").unwrap_or(false) {
            found.push(logged(r));
        }
    }
    // Everything looked at: go on from the last row looked at.
    Ok(Filtered { found, next: looked_to, done: scanned_all })
}

/// What a filtered read found, where to go on from, and whether it came to the
/// end of what there is now.
#[derive(Debug)]
pub struct Filtered {
    pub found: Vec<Logged>,
    pub next: Position,
    pub done: bool,
}

/// Where a read "after" `at` starts: before the first row (in log order) logged
/// after `at`, and no later than the horizon. Log order is the order in which
/// transactions took their ids (at their first write), `created_at` their start:
/// a transaction that began before `at` and wrote later sits after rows logged
/// after `at`, so the last row logged at or before `at` is not a safe start (it
/// would pass those). Rows of transactions still running, whenever they began,
/// come after the horizon. So nothing logged after `at` is passed; a row logged a
/// little before it may come after the start.
/// The position just before whatever is logged from now on (a consumer that
/// starts at the latest): the horizon below which every transaction has ended.
/// The horizon is the database's, the same for every tenant's log.
pub async fn position_now(db: &impl GenericClient, tenant: &TenantId) -> Result<Position, StoreError> {
    // Named for the rule that every store call says whose rows it is for; the horizon is everyone's.
    let _ = tenant;
    let row = db.query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[]).await?;
    Ok(Position { xid: row.get::<_, String>(0).parse().unwrap_or(0), seq: 0 })
}

pub async fn position_at(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    at: DateTime<Utc>,
) -> Result<Position, StoreError> {
    let row = db
        .query_one(
            "SELECT f.xid::text AS xid, f.seq, pg_snapshot_xmin(pg_current_snapshot())::text AS horizon
             FROM (SELECT 1) one
             LEFT JOIN LATERAL (
                SELECT l.xid, l.seq FROM sink_log l
                WHERE l.tenant_id = $1 AND l.app_id = $2 AND l.endpoint_id = $3 AND l.key = '' AND l.created_at > $4
                  AND l.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY l.xid, l.seq LIMIT 1) f ON true",
            &[&tenant.as_str(), &app.as_str(), &sink.as_str(), &at],
        )
        .await?;
    let horizon = Position { xid: row.get::<_, String>("horizon").parse().unwrap_or(0), seq: 0 };
    // Just before the first later row: (xid, seq - 1) holds no row of this sink
    // (a row of the same transaction has the same `created_at`, so it would be first).
    let first_later = row
        .get::<_, Option<String>>("xid")
        .map(|xid| Position { xid: xid.parse().unwrap_or(0), seq: row.get::<_, i64>("seq") - 1 });
    Ok(first_later.map_or(horizon, |p| p.min(horizon)))
}

/// A named consumer's position, if it has read, its row locked until the
/// caller's transaction ends (two reads by one consumer take turns, so its
/// position only moves forward).
pub async fn consumer(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    name: &str,
) -> Result<Option<Position>, StoreError> {
    let row = db
        .query_opt(
            "SELECT pos_xid::text AS xid, pos_seq AS seq FROM sink_consumers
             WHERE tenant_id = $1 AND app_id = $2 AND endpoint_id = $3 AND consumer = $4 FOR UPDATE",
            &[&tenant.as_str(), &app.as_str(), &sink.as_str(), &name],
        )
        .await?;
    Ok(row.map(|r| Position::from_row(&r)))
}

/// Moves a named consumer to `to` (made if new).
pub async fn set_consumer(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &AppId,
    sink: &EndpointId,
    name: &str,
    to: Position,
) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO sink_consumers (tenant_id, app_id, endpoint_id, consumer, pos_xid, pos_seq)
         VALUES ($1, $2, $3, $4, $5::text::xid8, $6)
         ON CONFLICT (tenant_id, app_id, endpoint_id, consumer)
         DO UPDATE SET pos_xid = EXCLUDED.pos_xid, pos_seq = EXCLUDED.pos_seq, updated_at = now()",
        &[&tenant.as_str(), &app.as_str(), &sink.as_str(), &name, &to.xid.to_string(), &to.seq],
    )
    .await?;
    Ok(())
}

/// Log rows older than their tenant's message retention (its own, or
/// `default_days`), of every tenant with a sink, each tenant's oldest first:
/// their messages are gone, or
/// going (a read joins them and skips what is missing). A tenant that keeps its
/// messages longer than the default keeps its log as long.
pub async fn prune(db: &impl GenericClient, default_days: i32, limit: i64) -> Result<u64, StoreError> {
    let sinks = EndpointKind::sql_set(EndpointKind::is_sink);
    Ok(db
        .execute(
            &format!("DELETE FROM sink_log WHERE ctid = ANY (ARRAY(
                SELECT x.ctid FROM tenants t
                -- Only tenants with a sink have a log (a sink's rows go with it).
                CROSS JOIN LATERAL (SELECT 1 FROM endpoints e WHERE e.tenant_id = t.id AND e.kind IN {sinks} LIMIT 1) has
                CROSS JOIN LATERAL (
                    SELECT l.ctid FROM sink_log l
                    WHERE l.tenant_id = t.id
                      AND l.created_at < now() - make_interval(days => COALESCE(t.message_days, $1))
                    ORDER BY l.created_at LIMIT $2) x
                LIMIT $2))"),
            &[&default_days, &limit],
        )
        .await?)
}

/// How far the sink horizon lags, in seconds: since the oldest transaction that
/// holds a transaction id on the server (or a prepared one) began; 0 when none
/// does. Transactions of other roles count only where Hookgate's role may see
/// them (`pg_read_all_stats`); prepared ones always.
pub async fn horizon_age(db: &impl GenericClient) -> Result<f64, StoreError> {
    let row = db
        .query_one(
            "SELECT COALESCE(EXTRACT(epoch FROM now() - LEAST(
                (SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL),
                (SELECT min(prepared) FROM pg_prepared_xacts)))::float8, 0)",
            &[],
        )
        .await?;
    Ok(row.get::<_, f64>(0).max(0.0))
}
