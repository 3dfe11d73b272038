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

/// Adds tallied counts (rows carry their tenant), one statement per counter.
pub async fn add(db: &impl GenericClient, counts: &[(Tally, i64)]) -> Result<(), StoreError> {
    for counter in
        [Counter::InboundDuplicates, Counter::RejectedSignature, Counter::RejectedInvalid, Counter::RejectedQuota]
    {
        let mut rows: Vec<_> = counts.iter().filter(|(t, n)| t.counter == counter && *n > 0).collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| (&a.0.tenant_id, a.0.day).cmp(&(&b.0.tenant_id, b.0.day)));
        let col = counter.column();
        let sql = format!(
            "INSERT INTO usage_days (tenant_id, day, shard, {col})
             SELECT t, d, floor(random() * {SHARDS})::smallint, n
             FROM unnest($1::text[], $2::date[], $3::bigint[]) AS u(t, d, n)
             ON CONFLICT (tenant_id, day, shard) DO UPDATE SET {col} = usage_days.{col} + EXCLUDED.{col}"
        );
        db.execute(
            &sql,
            &[
                &rows.iter().map(|(t, _)| t.tenant_id.to_string()).collect::<Vec<_>>(),
                &rows.iter().map(|(t, _)| t.day).collect::<Vec<_>>(),
                &rows.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
            ],
        )
        .await?;
    }
    Ok(())
}

/// One day of a tenant's usage, as the API answers it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
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

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
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
            "SELECT day, sum(inbound_accepted)::bigint, sum(inbound_duplicates)::bigint,
                sum(rejected_signature)::bigint, sum(rejected_invalid)::bigint, sum(rejected_quota)::bigint,
                sum(messages_created)::bigint, sum(attempts_succeeded)::bigint, sum(attempts_failed)::bigint,
                sum(bytes_in)::bigint, sum(bytes_out)::bigint
             FROM usage_days WHERE tenant_id = $1 AND day BETWEEN $2 AND $3
             GROUP BY day ORDER BY day",
            &[&tenant.as_str(), &from, &to],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let by_cause = RejectedByCause { signature: r.get(3), invalid: r.get(4), quota: r.get(5) };
            UsageDay {
                date: r.get(0),
                inbound_accepted: r.get(1),
                inbound_duplicates: r.get(2),
                inbound_rejected: by_cause.signature + by_cause.invalid + by_cause.quota,
                inbound_rejected_by_cause: by_cause,
                messages_created: r.get(6),
                attempts_succeeded: r.get(7),
                attempts_failed: r.get(8),
                bytes_in: r.get(9),
                bytes_out: r.get(10),
            }
        })
        .collect())
}

/// Gives back `n` of today's reservations (messages that were not created).
pub async fn release_messages(db: &impl GenericClient, tenant: &TenantId, n: i64) -> Result<(), StoreError> {
    db.execute(
        "UPDATE quota_days SET messages = greatest(messages - $2::bigint, 0)
         WHERE tenant_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date",
        &[&tenant.as_str(), &n],
    )
    .await?;
    Ok(())
}

/// Reserves `n` of today's (UTC) messages under `cap`: all of them, or none when
/// they would pass it. The row lock makes this exact across instances.
pub async fn reserve_messages(
    db: &impl GenericClient,
    tenant: &TenantId,
    cap: i64,
    n: i64,
) -> Result<bool, StoreError> {
    let row = db
        .query_opt(
            "INSERT INTO quota_days AS q (tenant_id, day, messages)
             SELECT $1, (now() AT TIME ZONE 'UTC')::date, $3::bigint WHERE $3::bigint <= $2::bigint
             ON CONFLICT (tenant_id, day) DO UPDATE SET messages = q.messages + EXCLUDED.messages
                 WHERE q.messages + EXCLUDED.messages <= $2::bigint
             RETURNING messages",
            &[&tenant.as_str(), &cap, &n],
        )
        .await?;
    Ok(row.is_some())
}
