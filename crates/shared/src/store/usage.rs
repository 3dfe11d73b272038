//! Usage per tenant and UTC day (`usage_days`), and the daily message cap's
//! reservations (`quota_days`).
//!
//! What commits is counted by the statement that commits it ([`bump`] is a CTE
//! the admitting, publishing and recording statements carry), so a count can be
//! neither lost nor doubled by a crash or a retried batch. What commits nothing
//! (a refused request, a duplicate Redis caught) is tallied in memory and added
//! by [`add`] every second.

use chrono::NaiveDate;
use serde::Serialize;
use tokio_postgres::GenericClient;

use super::StoreError;
use crate::ids::TenantId;

/// Rows per tenant and day: concurrent statements of one tenant pick one at
/// random and seldom wait on each other's row lock.
const SHARDS: i32 = 64;

/// A counter of `usage_days`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    InboundAccepted,
    InboundDuplicates,
    RejectedSignature,
    RejectedInvalid,
    RejectedQuota,
    MessagesCreated,
    AttemptsSucceeded,
    AttemptsFailed,
    BytesIn,
    BytesOut,
}

impl Counter {
    fn column(self) -> &'static str {
        match self {
            Counter::InboundAccepted => "inbound_accepted",
            Counter::InboundDuplicates => "inbound_duplicates",
            Counter::RejectedSignature => "rejected_signature",
            Counter::RejectedInvalid => "rejected_invalid",
            Counter::RejectedQuota => "rejected_quota",
            Counter::MessagesCreated => "messages_created",
            Counter::AttemptsSucceeded => "attempts_succeeded",
            Counter::AttemptsFailed => "attempts_failed",
            Counter::BytesIn => "bytes_in",
            Counter::BytesOut => "bytes_out",
        }
    }
}

/// What an attempt adds to usage, from rows of `(tenant_id, status, bytes)`: a
/// success or a failure, and the bytes sent. Every writer of attempts (the
/// delivery results, a FIFO batch) counts them so.
pub(super) const ATTEMPTS: &[(Counter, &str)] = &[
    (Counter::AttemptsSucceeded, "count(*) FILTER (WHERE status = 0)"),
    (Counter::AttemptsFailed, "count(*) FILTER (WHERE status <> 0)"),
    (Counter::BytesOut, "sum(bytes)"),
];

/// A CTE named `name` that adds, per tenant of the rows of `from` (a CTE or table
/// with `tenant_id`), each `(counter, aggregate)` to today's usage. One row per
/// tenant, in tenant order, so concurrent statements lock usage rows in one order.
pub(super) fn bump(name: &str, from: &str, counts: &[(Counter, &str)]) -> String {
    let cols = counts.iter().map(|(c, _)| c.column()).collect::<Vec<_>>().join(", ");
    let aggs = counts.iter().map(|(_, a)| format!("COALESCE({a}, 0)")).collect::<Vec<_>>().join(", ");
    let sets = counts
        .iter()
        .map(|(c, _)| format!("{0} = usage_days.{0} + EXCLUDED.{0}", c.column()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{name} AS (
            INSERT INTO usage_days (tenant_id, day, shard, {cols})
            SELECT tenant_id, (now() AT TIME ZONE 'UTC')::date, floor(random() * {SHARDS})::smallint, {aggs}
            FROM {from} GROUP BY tenant_id ORDER BY tenant_id
            ON CONFLICT (tenant_id, day, shard) DO UPDATE SET {sets}
         )"
    )
}

/// One tallied count: a tenant's counter on a UTC day.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tally {
    pub tenant_id: TenantId,
    pub day: NaiveDate,
    pub counter: Counter,
}

/// Adds tallied counts (rows carry their tenant) in one statement, one row per
/// tenant and day in (tenant, day) order: the order every usage write locks in,
/// so it cannot deadlock with the committing statements. `batch` names the
/// counts: the statement records it, and a batch written before adds nothing
/// (a retry after an answer lost in a stall, whose statement committed anyway).
pub async fn add(db: &impl GenericClient, batch: &str, counts: &[(Tally, i64)]) -> Result<(), StoreError> {
    let mut rows: std::collections::BTreeMap<(String, NaiveDate), [i64; 4]> = std::collections::BTreeMap::new();
    for (t, n) in counts {
        let slot = match t.counter {
            Counter::InboundDuplicates => 0,
            Counter::RejectedSignature => 1,
            Counter::RejectedInvalid => 2,
            Counter::RejectedQuota => 3,
            // Everything else is counted by the statement that commits it.
            _ => continue,
        };
        rows.entry((t.tenant_id.to_string(), t.day)).or_default()[slot] += n;
    }
    if rows.is_empty() {
        return Ok(());
    }
    let col = |i: usize| rows.values().map(|v| v[i]).collect::<Vec<i64>>();
    db.execute(
        &format!(
            "WITH once AS (INSERT INTO usage_flushes (id) VALUES ($7) ON CONFLICT (id) DO NOTHING RETURNING id)
             INSERT INTO usage_days (tenant_id, day, shard, inbound_duplicates, rejected_signature, rejected_invalid,
                rejected_quota)
             SELECT t, d, floor(random() * {SHARDS})::smallint, a, b, c, e
             FROM unnest($1::text[], $2::date[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
                 WITH ORDINALITY AS u(t, d, a, b, c, e, n)
             WHERE EXISTS (SELECT 1 FROM once)
             ORDER BY n
             ON CONFLICT (tenant_id, day, shard) DO UPDATE SET
                 inbound_duplicates = usage_days.inbound_duplicates + EXCLUDED.inbound_duplicates,
                 rejected_signature = usage_days.rejected_signature + EXCLUDED.rejected_signature,
                 rejected_invalid = usage_days.rejected_invalid + EXCLUDED.rejected_invalid,
                 rejected_quota = usage_days.rejected_quota + EXCLUDED.rejected_quota"
        ),
        &[
            &rows.keys().map(|k| k.0.clone()).collect::<Vec<_>>(),
            &rows.keys().map(|k| k.1).collect::<Vec<_>>(),
            &col(0),
            &col(1),
            &col(2),
            &col(3),
            &batch,
        ],
    )
    .await?;
    Ok(())
}

/// Forgets the batch ids of tallies written more than a day ago (a retry comes
/// within seconds). Returns how many went.
pub async fn forget_flushes(db: &impl GenericClient) -> Result<u64, StoreError> {
    Ok(db.execute("DELETE FROM usage_flushes WHERE at < now() - interval '1 day'", &[]).await?)
}

/// Folds the shards of days before yesterday (UTC) into one row each (shard 0),
/// up to `batch` rows a call, in one statement: the sums stay the same, and a
/// tenant's past day costs one row instead of up to [`SHARDS`]. Yesterday is left
/// alone: a tally of its last second may still arrive. Returns the rows folded.
pub async fn compact(db: &impl GenericClient, batch: i64) -> Result<u64, StoreError> {
    let row = db
        .query_one(
            "WITH old AS (
                DELETE FROM usage_days u USING (
                    SELECT tenant_id, day, shard FROM usage_days
                    WHERE shard <> 0 AND day < (now() AT TIME ZONE 'UTC')::date - 1
                    ORDER BY tenant_id, day, shard LIMIT $1 FOR UPDATE SKIP LOCKED
                ) d
                WHERE u.tenant_id = d.tenant_id AND u.day = d.day AND u.shard = d.shard
                RETURNING u.*
             ), folded AS (
                INSERT INTO usage_days AS x (tenant_id, day, shard, inbound_accepted, inbound_duplicates,
                    rejected_signature, rejected_invalid, rejected_quota, messages_created, attempts_succeeded,
                    attempts_failed, bytes_in, bytes_out)
                SELECT tenant_id, day, 0, sum(inbound_accepted), sum(inbound_duplicates), sum(rejected_signature),
                    sum(rejected_invalid), sum(rejected_quota), sum(messages_created), sum(attempts_succeeded),
                    sum(attempts_failed), sum(bytes_in), sum(bytes_out)
                FROM old GROUP BY tenant_id, day ORDER BY tenant_id, day
                ON CONFLICT (tenant_id, day, shard) DO UPDATE SET
                    inbound_accepted = x.inbound_accepted + EXCLUDED.inbound_accepted,
                    inbound_duplicates = x.inbound_duplicates + EXCLUDED.inbound_duplicates,
                    rejected_signature = x.rejected_signature + EXCLUDED.rejected_signature,
                    rejected_invalid = x.rejected_invalid + EXCLUDED.rejected_invalid,
                    rejected_quota = x.rejected_quota + EXCLUDED.rejected_quota,
                    messages_created = x.messages_created + EXCLUDED.messages_created,
                    attempts_succeeded = x.attempts_succeeded + EXCLUDED.attempts_succeeded,
                    attempts_failed = x.attempts_failed + EXCLUDED.attempts_failed,
                    bytes_in = x.bytes_in + EXCLUDED.bytes_in,
                    bytes_out = x.bytes_out + EXCLUDED.bytes_out
             )
             SELECT count(*) FROM old",
            &[&batch],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// One day of a tenant's usage, as the API answers it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageDay {
    pub date: NaiveDate,
    pub inbound_accepted: i64,
    pub inbound_duplicates: i64,
    pub inbound_rejected: i64,
    pub inbound_rejected_by_cause: RejectedByCause,
    pub messages_created: i64,
    pub attempts_succeeded: i64,
    pub attempts_failed: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = UsageRejectedByCause)]
pub struct RejectedByCause {
    pub signature: i64,
    pub invalid: i64,
    pub quota: i64,
}

/// The tenant's usage from `from` to `to` (both included), one entry per day that
/// has any, oldest first.
pub async fn days(
    db: &impl GenericClient,
    tenant: &TenantId,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<UsageDay>, StoreError> {
    let rows = db
        .query(
            "SELECT day, sum(inbound_accepted)::bigint AS inbound_accepted,
                sum(inbound_duplicates)::bigint AS inbound_duplicates,
                sum(rejected_signature)::bigint AS rejected_signature,
                sum(rejected_invalid)::bigint AS rejected_invalid, sum(rejected_quota)::bigint AS rejected_quota,
                sum(messages_created)::bigint AS messages_created,
                sum(attempts_succeeded)::bigint AS attempts_succeeded,
                sum(attempts_failed)::bigint AS attempts_failed,
                sum(bytes_in)::bigint AS bytes_in, sum(bytes_out)::bigint AS bytes_out
             FROM usage_days WHERE tenant_id = $1 AND day BETWEEN $2 AND $3
             GROUP BY day ORDER BY day",
            &[&tenant.as_str(), &from, &to],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let by_cause = RejectedByCause {
                signature: r.get("rejected_signature"),
                invalid: r.get("rejected_invalid"),
                quota: r.get("rejected_quota"),
            };
            UsageDay {
                date: r.get("day"),
                inbound_accepted: r.get("inbound_accepted"),
                inbound_duplicates: r.get("inbound_duplicates"),
                inbound_rejected: by_cause.signature + by_cause.invalid + by_cause.quota,
                inbound_rejected_by_cause: by_cause,
                messages_created: r.get("messages_created"),
                attempts_succeeded: r.get("attempts_succeeded"),
                attempts_failed: r.get("attempts_failed"),
                bytes_in: r.get("bytes_in"),
                bytes_out: r.get("bytes_out"),
            }
        })
        .collect())
}

/// Gives back `n` reservations of `day` (messages that surely were not created).
pub async fn release_messages(
    db: &impl GenericClient,
    tenant: &TenantId,
    day: NaiveDate,
    n: i64,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE quota_days SET messages = greatest(messages - $3::bigint, 0) WHERE tenant_id = $1 AND day = $2",
        &[&tenant.as_str(), &day, &n],
    )
    .await?;
    Ok(())
}

/// Reserves `n` of today's (UTC) messages under `cap`: all of them (the day they
/// count on), or none when they would pass it. The row lock makes this exact
/// across instances.
pub async fn reserve_messages(
    db: &impl GenericClient,
    tenant: &TenantId,
    cap: i64,
    n: i64,
) -> Result<Option<NaiveDate>, StoreError> {
    let row = db
        .query_opt(
            "INSERT INTO quota_days AS q (tenant_id, day, messages)
             SELECT $1, (now() AT TIME ZONE 'UTC')::date, $3::bigint WHERE $3::bigint <= $2::bigint
             ON CONFLICT (tenant_id, day) DO UPDATE SET messages = q.messages + EXCLUDED.messages
                 WHERE q.messages + EXCLUDED.messages <= $2::bigint
             RETURNING day",
            &[&tenant.as_str(), &cap, &n],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}
