//! What the retention gauges show: each family's size, its oldest row kept, and
//! how late its pruning is. Every lookup is a catalog read or an index probe per
//! tenant or source, never a scan.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{partitions::Partition, StoreError};

/// The families the gauges size: the partitioned tables and the key tables.
pub const SIZED: [&str; 8] = [
    "inbound_events",
    "inbound_keys",
    "messages",
    "deliveries",
    "attempts",
    "message_event_ids",
    "message_request_keys",
    "idempotency_keys",
];

/// One family's gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyStats {
    pub family: &'static str,
    /// Postgres's estimate (`reltuples`, summed over partitions), cheap at any
    /// size; -1 before the first analyze.
    pub rows: i64,
    /// Tables, indexes and TOAST, over all partitions.
    pub bytes: i64,
    /// Unix time of the oldest row kept, if any.
    pub oldest: Option<f64>,
    /// How long the most overdue row has been past the time it should have gone
    /// (pruning lag), in seconds: by its own retention where rows are deleted,
    /// by its partition's end plus the horizon where partitions are dropped.
    pub overdue: f64,
}

/// The inputs the gauges need besides the tables.
pub struct Horizons<'a> {
    pub inbound_default: i32,
    pub message_default: i32,
    /// The longest retentions in effect (see [`super::partitions::horizons`]).
    pub inbound_horizon: i32,
    pub message_horizon: i32,
    pub idempotency_ttl: std::time::Duration,
    pub partitions: &'a [Partition],
}

/// How far past `now` the oldest partition of `family` is overdue for its drop.
fn drop_overdue(partitions: &[Partition], family: &str, horizon_days: i32, now: DateTime<Utc>) -> f64 {
    partitions
        .iter()
        .filter(|p| p.family == family)
        .map(|p| (now - (p.to + chrono::Duration::days(horizon_days.into()))).num_milliseconds() as f64 / 1000.0)
        .fold(0.0, f64::max)
}

pub async fn stats(db: &impl GenericClient, h: &Horizons<'_>) -> Result<Vec<FamilyStats>, StoreError> {
    let row = db
        .query_one(
            // One probe per source (per tenant) for its oldest row: the oldest kept,
            // and where its retention is shorter than the horizon (row-by-row
            // pruning), when it was due.
            "WITH inbound_o AS (
                SELECT x.o, COALESCE(s.retention_days, t.inbound_days, $1) AS days
                FROM sources s JOIN tenants t ON t.id = s.tenant_id CROSS JOIN LATERAL (
                    SELECT e.received_at AS o FROM inbound_events e WHERE e.tenant_id = s.tenant_id AND e.source_id = s.id
                    ORDER BY e.id LIMIT 1) x
             ), inbound_rows AS (
                SELECT o + make_interval(days => days) AS due FROM inbound_o WHERE days < $3
             ), key_o AS (
                SELECT x.o, x.o + make_interval(days => COALESCE(s.retention_days, t.inbound_days, $1)) AS due
                FROM sources s JOIN tenants t ON t.id = s.tenant_id CROSS JOIN LATERAL (
                    SELECT k.received_at AS o FROM inbound_keys k WHERE k.tenant_id = s.tenant_id AND k.source_id = s.id
                    ORDER BY k.received_at LIMIT 1) x
             ), message_o AS (
                SELECT x.o, COALESCE(t.message_days, $2) AS days FROM tenants t CROSS JOIN LATERAL (
                    SELECT m.created_at AS o FROM messages m WHERE m.tenant_id = t.id ORDER BY m.created_at LIMIT 1) x
             ), message_rows AS (
                SELECT o + make_interval(days => days) AS due FROM message_o WHERE days < $4
             ), idem_o AS (
                SELECT min(created_at) AS o FROM idempotency_keys
             ), request_o AS (
                SELECT min(created_at) AS o FROM message_request_keys
             )
             SELECT extract(epoch FROM (SELECT min(o) FROM inbound_o))::float8 AS inbound_oldest,
                    COALESCE(extract(epoch FROM now() - (SELECT min(due) FROM inbound_rows))::float8, 0)
                        AS inbound_overdue,
                    extract(epoch FROM (SELECT min(o) FROM key_o))::float8 AS key_oldest,
                    COALESCE(extract(epoch FROM now() - (SELECT min(due) FROM key_o))::float8, 0) AS key_overdue,
                    extract(epoch FROM (SELECT min(o) FROM message_o))::float8 AS message_oldest,
                    COALESCE(extract(epoch FROM now() - (SELECT min(due) FROM message_rows))::float8, 0)
                        AS message_overdue,
                    extract(epoch FROM (SELECT o FROM idem_o))::float8 AS idem_oldest,
                    COALESCE(extract(epoch FROM now() - (SELECT o FROM idem_o) - make_interval(secs => $5))::float8, 0)
                        AS idem_overdue,
                    extract(epoch FROM (SELECT o FROM request_o))::float8 AS request_oldest,
                    COALESCE(extract(epoch FROM now() - (SELECT o FROM request_o) - make_interval(secs => $5))::float8, 0)
                        AS request_overdue,
                    now() AS db_now",
            &[&h.inbound_default, &h.message_default, &h.inbound_horizon, &h.message_horizon, &h.idempotency_ttl.as_secs_f64()],
        )
        .await?;
    let now: DateTime<Utc> = row.get("db_now");
    let names: Vec<&str> = SIZED.to_vec();
    let sizes = db
        .query(
            // A table, or a partitioned table's partitions, but not one being detached:
            // sizing opens a relation, and would queue behind the detach's lock.
            "SELECT f.name, COALESCE(sum(c.reltuples) FILTER (WHERE c.reltuples >= 0), -1)::int8 AS row_estimate,
                    COALESCE(sum(pg_total_relation_size(c.oid)), 0)::int8 AS total_bytes
             FROM unnest($1::text[]) AS f(name)
             LEFT JOIN pg_class t ON t.relname = f.name AND t.relnamespace = current_schema()::regnamespace
             LEFT JOIN LATERAL (
                 SELECT t.oid AS oid WHERE t.relkind = 'r'
                 UNION ALL
                 SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = t.oid AND NOT i.inhdetachpending
             ) leaf ON true
             LEFT JOIN pg_class c ON c.oid = leaf.oid
             GROUP BY f.name",
            &[&names],
        )
        .await?;
    let size = |name: &str| {
        sizes
            .iter()
            .find(|r| r.get::<_, String>("name") == name)
            .map(|r| (r.get::<_, i64>("row_estimate"), r.get::<_, i64>("total_bytes")))
            .unwrap_or((0, 0))
    };
    let family = |family: &'static str, oldest: Option<f64>, overdue: f64| {
        let (rows, bytes) = size(family);
        FamilyStats { family, rows, bytes, oldest, overdue: overdue.max(0.0) }
    };
    let dropped = |f: &str, days: i32| drop_overdue(h.partitions, f, days, now);
    let inbound_overdue = row.get::<_, f64>("inbound_overdue").max(dropped("inbound_events", h.inbound_horizon));
    let message_overdue = row.get::<_, f64>("message_overdue").max(dropped("messages", h.message_horizon));
    Ok(vec![
        family("inbound_events", row.get("inbound_oldest"), inbound_overdue),
        family("inbound_keys", row.get("key_oldest"), row.get("key_overdue")),
        family("messages", row.get("message_oldest"), message_overdue),
        family("deliveries", None, dropped("deliveries", h.message_horizon)),
        family("attempts", None, dropped("attempts", h.message_horizon)),
        family("message_event_ids", None, 0.0),
        family("message_request_keys", row.get("request_oldest"), row.get("request_overdue")),
        family("idempotency_keys", row.get("idem_oldest"), row.get("idem_overdue")),
    ])
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn a_partition_is_overdue_from_its_end_plus_the_horizon() {
        let day = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let p = |from: i64| Partition {
            family: "messages",
            name: format!("messages_p{from}"),
            from: Some(day + chrono::Duration::days(from)),
            to: day + chrono::Duration::days(from + 1),
            detach_pending: false,
        };
        let parts = [p(0), p(1)];
        // The first ends on day 1; with a 30-day horizon it may go on day 31.
        let now = day + chrono::Duration::days(31) + chrono::Duration::hours(2);
        assert_eq!(drop_overdue(&parts, "messages", 30, now), 7200.0);
        assert_eq!(drop_overdue(&parts, "messages", 40, now), 0.0);
        assert_eq!(drop_overdue(&parts, "attempts", 1, now), 0.0, "another family's partitions do not count");
    }
}
