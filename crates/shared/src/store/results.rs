//! Recording delivery results: attempts, delivery states, endpoint health and the
//! notices they give, for a batch of outcomes in one transaction; each tenant's
//! part in statements that name that tenant alone.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::deliveries::{Outcome, Recorded};
use super::operational::{self, AttemptNotice, Notice};
use super::usage;
use super::{attempt_headers, wakes, StoreError};
use crate::{
    ids::{AppId, EndpointId, TenantId},
    status::{DeliveryStatus, Trigger},
};

/// Writes a batch of outcomes in one transaction: for each tenant, in tenant order
/// (the order every usage write locks in), its attempts, its delivery states (each
/// only while its claim's token is still the row's, the wakes of those due again
/// brought forward) and its endpoints' health; then the notices. The tenants'
/// statements go out together (pipelined), so a batch costs one round trip per
/// statement kind whatever the tenants in it.
///
/// `lock_wait` bounds each wait for a lock (a row an API call or another recorder
/// holds) below the statement timeout: past it, [`StoreError::Locked`].
pub async fn record(
    db: &mut deadpool_postgres::Client,
    outcomes: &[Outcome],
    disable_after: Duration,
    lock_wait: Option<Duration>,
) -> Result<Recorded, StoreError> {
    let mut by_tenant: BTreeMap<&TenantId, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        by_tenant.entry(&o.tenant_id).or_default().push(o);
    }
    let tx = db.transaction().await?;
    if let Some(wait) = lock_wait {
        // One more round trip per batch, against a recorder held up by one locked row.
        tx.batch_execute(&format!("SET LOCAL lock_timeout = {}", wait.as_millis().max(1))).await?;
    }
    let parts = futures_util::future::try_join_all(
        by_tenant.iter().map(|(tenant, outs)| record_tenant(&tx, tenant, outs, disable_after)),
    )
    .await?;
    let mut recorded = Recorded::default();
    let mut notices = Vec::new();
    for (part, tenant_notices) in parts {
        recorded.disabled += part.disabled;
        recorded.stale += part.stale;
        notices.extend(tenant_notices);
    }
    recorded.operational = operational::emit(&*tx, &notices).await?;
    tx.commit().await?;
    Ok(recorded)
}

/// One tenant's part of a batch; its notices are returned for the caller to emit.
pub async fn record_tenant(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &TenantId,
    outcomes: &[&Outcome],
    disable_after: Duration,
) -> Result<(Recorded, Vec<Notice>), StoreError> {
    // The batch's message ids as a range too: these statements are prepared, and a
    // generic plan prunes partitions by scalar parameters (not by an array's).
    let lo = outcomes.iter().map(|o| o.msg_id.as_str()).min().unwrap_or_default();
    let hi = outcomes.iter().map(|o| o.msg_id.as_str()).max().unwrap_or_default();
    let attempted: Vec<&Outcome> = outcomes.iter().copied().filter(|o| o.attempt.is_some()).collect();
    let (_, applied, health) = futures_util::try_join!(
        attempts(tx, tenant, &attempted, lo, hi),
        states(tx, tenant, outcomes, lo, hi),
        health(tx, tenant, &attempted, disable_after),
    )?;
    let (applied, noticed) = applied;
    let mut notices = Vec::new();
    let newly_disabled: Vec<Notice> = health
        .into_iter()
        .map(|(app, ep, since)| {
            let mut n = Notice::endpoint(tenant, "endpoint.disabled", &app, &ep);
            n.fail_since = since;
            n.trigger = Some("automatic");
            n
        })
        .collect();
    // Notices only of the outcomes this claim still owned: a stale one's verdict,
    // and so its notice, is the new owner's to give. A failed attempt that disabled
    // its endpoint was its delivery's last: its retries are exhausted too.
    for o in outcomes
        .iter()
        .filter(|o| may_notice(o) && noticed.contains(&(o.msg_id.to_string(), o.endpoint_id.to_string())))
    {
        let gone =
            newly_disabled.iter().any(|n| n.endpoint_id.as_ref() == Some(&o.endpoint_id) && n.app_id == o.app_id);
        let kind = match o.notice {
            Some(AttemptNotice::Recovered) => AttemptNotice::Recovered,
            _ if gone => AttemptNotice::Exhausted,
            Some(kind) => kind,
            None => continue,
        };
        let mut n = Notice::endpoint(tenant, kind.event_type(), &o.app_id, &o.endpoint_id);
        n.msg_id = Some(o.msg_id.clone());
        n.attempt = o.attempt.as_ref().map(|a| (a.id.clone(), a.status_code));
        notices.push(n);
    }
    let disabled = newly_disabled.len() as u64;
    notices.extend(newly_disabled);
    Ok((Recorded { disabled, stale: outcomes.len() as u64 - applied, operational: 0 }, notices))
}

/// Inserts the attempts. Idempotent (a commit whose acknowledgement was lost is
/// retried with the same attempt ids: usage counts only the attempts this
/// statement inserted), and an attempt of a message deleted meanwhile, or of an
/// application erased meanwhile, is dropped rather than failing the batch.
async fn attempts(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &TenantId,
    attempted: &[&Outcome],
    lo: &str,
    hi: &str,
) -> Result<(), StoreError> {
    if attempted.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&Outcome) -> String| attempted.iter().map(|o| f(o)).collect::<Vec<String>>();
    let a = |o: &Outcome| o.attempt.clone().expect("filtered");
    // Both forms of the recorded headers: the statement stores the compact one
    // once the contract allowing it has run.
    let compact: Vec<String> = attempted
        .iter()
        .map(|o| {
            let recorded = &o.attempt.as_ref().expect("filtered").request_headers;
            attempt_headers::compact_text(recorded, Some(o.msg_id.as_str()))
        })
        .collect();
    let statement = tx
        .prepare_cached(&format!(
            "WITH u AS (
                SELECT $1::text AS tenant_id, u.* FROM unnest($2::text[], $3::text[], $4::text[], $5::text[],
                    $6::text[], $7::smallint[], $8::smallint[], $9::smallint[], $10::text[], $11::bigint[],
                    $12::text[], $15::bigint[], $16::text[])
                    AS u(app_id, id, msg_id, endpoint_id, url, status, trigger_type, code, response, ms, headers, bytes,
                        compact)
             ), {}, ins AS (
                INSERT INTO attempts (tenant_id, app_id, id, msg_id, endpoint_id, url, status, trigger_type,
                    response_status_code, response, response_duration_ms, request_headers)
                SELECT u.tenant_id, u.app_id, u.id, u.msg_id, u.endpoint_id, u.url, u.status, u.trigger_type, u.code,
                    u.response, u.ms, (CASE WHEN {} THEN u.compact ELSE u.headers END)::jsonb
                FROM u JOIN locked_apps la ON la.id = u.app_id
                WHERE EXISTS (SELECT 1 FROM messages m
                    WHERE m.tenant_id = $1 AND m.id BETWEEN $13 AND $14
                      AND m.app_id = u.app_id AND m.id = u.msg_id)
                ON CONFLICT (tenant_id, app_id, msg_id, id) DO NOTHING
                RETURNING tenant_id, id, status
             ),
             -- What was inserted, with its size: a hashed subplan (`IS TRUE` keeps
             -- Postgres from making it a join, which with hash joins off is a nested
             -- loop over both lists: 110 ms for a batch of 1,000 against 15).
             counted AS (SELECT u.tenant_id, u.status, u.bytes FROM u WHERE (u.id IN (SELECT id FROM ins)) IS TRUE), {}
             SELECT 1",
            super::parents::lock_apps("$1", "u", "app_id"),
            attempt_headers::COMPACT,
            usage::bump("usage", "counted", usage::ATTEMPTS)
        ))
        .await?;
    tx.execute(
        &statement,
        &[
            &tenant.as_str(),
            &col(|o| o.app_id.to_string()),
            &col(|o| o.attempt.as_ref().expect("filtered").id.to_string()),
            &col(|o| o.msg_id.to_string()),
            &col(|o| o.endpoint_id.to_string()),
            &attempted.iter().map(|o| a(o).url).collect::<Vec<_>>(),
            &attempted
                .iter()
                .map(|o| if a(o).success { DeliveryStatus::Success } else { DeliveryStatus::Failed }.code())
                .collect::<Vec<i16>>(),
            &attempted.iter().map(|o| o.trigger.code()).collect::<Vec<i16>>(),
            &attempted.iter().map(|o| a(o).status_code).collect::<Vec<i16>>(),
            &attempted.iter().map(|o| a(o).response).collect::<Vec<_>>(),
            &attempted.iter().map(|o| a(o).duration_ms).collect::<Vec<i64>>(),
            &attempted.iter().map(|o| a(o).request_headers).collect::<Vec<_>>(),
            &lo,
            &hi,
            &attempted.iter().map(|o| a(o).bytes).collect::<Vec<i64>>(),
            &compact,
        ],
    )
    .await?;
    Ok(())
}

/// Writes the delivery states, each only while the row's fencing token is its
/// claim's, and brings forward the wakes of those due again (a retry, or a
/// delivery its throttle wrote back). A row written back untried (its throttle)
/// keeps its trigger: a manual resend held by a throttle stays manual. Returns
/// how many were applied and which of those may give a notice.
async fn states(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &TenantId,
    outcomes: &[&Outcome],
    lo: &str,
    hi: &str,
) -> Result<(u64, HashSet<(String, String)>), StoreError> {
    let s = |f: fn(&Outcome) -> String| outcomes.iter().map(|o| f(o)).collect::<Vec<String>>();
    let statement = tx
        .prepare_cached(&format!(
            "WITH applied AS (
                UPDATE deliveries d SET status = u.status, next_attempt_at = u.next, last_attempt_at = now(),
                    attempts = d.attempts + u.tried, trigger = CASE WHEN u.tried = 0 THEN d.trigger ELSE 0 END,
                    lease_token = NULL, leased_until = NULL
                FROM unnest($2::text[], $3::text[], $4::text[], $5::smallint[], $6::timestamptz[],
                        $7::int[], $8::bigint[], $11::bool[])
                    AS u(app_id, msg_id, endpoint_id, status, next, tried, token, noticed)
                WHERE d.tenant_id = $1 AND d.msg_id BETWEEN $9 AND $10
                  AND d.app_id = u.app_id AND d.msg_id = u.msg_id AND d.endpoint_id = u.endpoint_id
                  AND d.lease_token = u.token
                RETURNING d.tenant_id, d.app_id, d.msg_id, d.endpoint_id, d.status, d.next_attempt_at, u.noticed
             ), again AS (
                SELECT tenant_id, app_id, msg_id, endpoint_id, next_attempt_at FROM applied WHERE status = 1
             ), {}
             SELECT count(*) AS applied_count,
                 array_agg(msg_id || ' ' || endpoint_id) FILTER (WHERE noticed) AS noticed_keys
             FROM applied",
            wakes::lower("again")
        ))
        .await?;
    let row = tx
        .query_one(
            &statement,
            &[
                &tenant.as_str(),
                &s(|o| o.app_id.to_string()),
                &s(|o| o.msg_id.to_string()),
                &s(|o| o.endpoint_id.to_string()),
                &outcomes.iter().map(|o| o.status.code()).collect::<Vec<i16>>(),
                &outcomes.iter().map(|o| o.next_attempt_at).collect::<Vec<Option<DateTime<Utc>>>>(),
                &outcomes.iter().map(|o| o.attempt.is_some() as i32).collect::<Vec<i32>>(),
                &outcomes.iter().map(|o| o.lease).collect::<Vec<i64>>(),
                &lo,
                &hi,
                &outcomes.iter().map(|o| may_notice(o)).collect::<Vec<bool>>(),
            ],
        )
        .await?;
    let applied: i64 = row.get("applied_count");
    let noticed = row
        .get::<_, Option<Vec<String>>>("noticed_keys")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|k| k.split_once(' ').map(|(m, e)| (m.to_owned(), e.to_owned())))
        .collect();
    Ok((applied as u64, noticed))
}

/// Endpoint health, one row per endpoint, by when its attempts were made rather
/// than when they are recorded (results can land out of order: a batch held up
/// by a lock or a stall, a claim whose lease ran out). The endpoint keeps when
/// its latest success was made: a success ends a streak only if the streak began
/// before it, and a failure begins or carries on a streak only if it was made
/// after it. A streak that fails again when it is older than `disable_after`
/// (never in the batch that began it), or a 410, disables. Returns the endpoints
/// this statement disabled, with since when they failed.
///
/// The rows are locked first, in key order, and the new state computed from
/// them as locked: two recorders disabling one endpoint at once see each other's
/// write, so only the first reports it (a statement's own snapshot would show
/// both the endpoint as it was).
async fn health(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &TenantId,
    attempted: &[&Outcome],
    disable_after: Duration,
) -> Result<Vec<(AppId, EndpointId, Option<DateTime<Utc>>)>, StoreError> {
    let by_endpoint = endpoint_health(attempted);
    if by_endpoint.is_empty() {
        return Ok(Vec::new());
    }
    let statement = tx
        .prepare_cached(
            "WITH u AS (
                -- Times from the workers' clocks, never later than Postgres's: a
                -- worker whose clock runs ahead cannot date a success in the future.
                SELECT u.app_id, u.id, u.gone,
                    CASE WHEN u.ok_at > now() THEN now() ELSE u.ok_at END AS ok_at,
                    CASE WHEN u.fail_at > now() THEN now() ELSE u.fail_at END AS fail_at,
                    CASE WHEN u.last_fail_at > now() THEN now() ELSE u.last_fail_at END AS last_fail_at
                FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::bool[], $7::timestamptz[],
                    $8::timestamptz[]) AS u(app_id, id, ok_at, gone, fail_at, last_fail_at)
             ), cur AS (
                SELECT e.app_id, e.id, e.disabled, e.failing_since, e.last_success_at FROM endpoints e
                JOIN u ON e.tenant_id = $1 AND e.app_id = u.app_id AND e.id = u.id
                ORDER BY e.app_id, e.id
                FOR NO KEY UPDATE OF e
             ), known AS (
                SELECT c.app_id, c.id, c.disabled, c.failing_since, u.gone, u.fail_at, u.last_fail_at,
                    -- The latest success made, this batch's or one recorded before.
                    GREATEST(c.last_success_at, u.ok_at) AS ok_at
                FROM cur c JOIN u ON u.app_id = c.app_id AND u.id = c.id
             ), judged AS (
                SELECT k.*,
                    -- A failure of this batch made after every success known.
                    COALESCE(k.last_fail_at > COALESCE(k.ok_at, '-infinity'), false) AS failed_after,
                    -- The stored streak began after every success known.
                    COALESCE(k.failing_since > COALESCE(k.ok_at, '-infinity'), false) AS kept,
                    -- The first failure after the latest success (this batch's first
                    -- after its own last success, or else its last).
                    CASE WHEN k.fail_at > COALESCE(k.ok_at, '-infinity') THEN k.fail_at ELSE k.last_fail_at END
                        AS start
                FROM known k
             ), next AS (
                SELECT j.app_id, j.id, j.disabled, j.gone, j.ok_at, j.kept AND j.failed_after AS goes_on,
                    CASE WHEN j.failed_after THEN CASE WHEN j.kept THEN LEAST(j.failing_since, j.start) ELSE j.start END
                         WHEN j.kept THEN j.failing_since
                    END AS failing_since
                FROM judged j
             )
             UPDATE endpoints e SET
                failing_since = n.failing_since,
                last_success_at = n.ok_at,
                disabled = n.disabled OR n.gone
                    OR (n.goes_on AND n.failing_since < now() - make_interval(secs => $6))
             FROM next n
             WHERE e.tenant_id = $1 AND e.app_id = n.app_id AND e.id = n.id
             RETURNING e.disabled AND NOT n.disabled AS newly_disabled, e.app_id, e.id, e.failing_since",
        )
        .await?;
    let rows = tx
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &by_endpoint.iter().map(|(k, _)| k.0.clone()).collect::<Vec<_>>(),
                &by_endpoint.iter().map(|(k, _)| k.1.clone()).collect::<Vec<_>>(),
                &by_endpoint.iter().map(|(_, h)| h.ok_at).collect::<Vec<_>>(),
                &by_endpoint.iter().map(|(_, h)| h.gone).collect::<Vec<_>>(),
                &disable_after.as_secs_f64(),
                &by_endpoint.iter().map(|(_, h)| h.fail_at).collect::<Vec<_>>(),
                &by_endpoint.iter().map(|(_, h)| h.last_fail_at).collect::<Vec<_>>(),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .filter(|r| r.get::<_, bool>("newly_disabled"))
        .map(|r| (AppId::from_db(r.get("app_id")), EndpointId::from_db(r.get("id")), r.get("failing_since")))
        .collect())
}

/// What a batch says of one endpoint's health.
#[derive(Debug, Default, PartialEq)]
struct Health {
    /// When its last successful attempt was made.
    ok_at: Option<DateTime<Utc>>,
    /// When its first failed attempt after that (or its first, without one) was made.
    fail_at: Option<DateTime<Utc>>,
    /// When its last failed attempt was made.
    last_fail_at: Option<DateTime<Utc>>,
    /// Answered 410 Gone.
    gone: bool,
}

/// Each endpoint's [`Health`] from the batch's attempts, in key order.
fn endpoint_health(attempted: &[&Outcome]) -> Vec<((String, String), Health)> {
    let mut by_endpoint: BTreeMap<(String, String), Health> = BTreeMap::new();
    for o in attempted {
        let Some(a) = &o.attempt else { continue };
        let h = by_endpoint.entry((o.app_id.to_string(), o.endpoint_id.to_string())).or_default();
        h.gone |= o.disable_endpoint;
        if a.success {
            h.ok_at = h.ok_at.max(Some(a.at));
        } else {
            h.last_fail_at = h.last_fail_at.max(Some(a.at));
        }
    }
    for o in attempted {
        let Some(a) = o.attempt.as_ref().filter(|a| !a.success) else { continue };
        let h = by_endpoint.get_mut(&(o.app_id.to_string(), o.endpoint_id.to_string())).expect("entered above");
        if h.ok_at.is_none_or(|ok| a.at > ok) {
            h.fail_at = Some(h.fail_at.map_or(a.at, |f| f.min(a.at)));
        }
    }
    by_endpoint.into_iter().collect()
}

/// Whether an outcome may tell the operational webhooks something: it has a
/// notice, or it is a scheduled attempt that failed (its endpoint may be disabled
/// by it, which makes it the delivery's last).
fn may_notice(o: &Outcome) -> bool {
    o.notice.is_some() || (o.trigger != Trigger::Manual && o.attempt.as_ref().is_some_and(|a| !a.success))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ids::{AttemptId, MessageId},
        store::deliveries::AttemptRecord,
    };

    fn attempt(endpoint: &str, success: bool, secs_ago: i64) -> Outcome {
        Outcome {
            tenant_id: TenantId::from_db("tnt_a".into()),
            app_id: AppId::from_db("app_a".into()),
            msg_id: MessageId::from_db("msg_a".into()),
            endpoint_id: EndpointId::from_db(endpoint.into()),
            lease: 1,
            trigger: Trigger::Scheduled,
            attempt: Some(AttemptRecord {
                id: AttemptId::generate(),
                url: String::new(),
                success,
                status_code: if success { 200 } else { 500 },
                response: String::new(),
                duration_ms: 1,
                at: Utc::now() - chrono::Duration::seconds(secs_ago),
                request_headers: "{}".into(),
                bytes: 0,
            }),
            status: DeliveryStatus::Success,
            next_attempt_at: None,
            disable_endpoint: false,
            notice: None,
        }
    }

    #[test]
    fn a_batch_says_when_an_endpoint_last_succeeded_and_when_it_failed_after() {
        let batch = [
            attempt("ep_1", false, 30),
            attempt("ep_1", true, 20),
            attempt("ep_1", false, 10),
            attempt("ep_1", false, 5),
        ];
        let h = endpoint_health(&batch.iter().collect::<Vec<_>>());
        let at = |i: usize| Some(batch[i].attempt.as_ref().unwrap().at);
        assert_eq!(
            h[0].1,
            Health { ok_at: at(1), fail_at: at(2), last_fail_at: at(3), gone: false },
            "failures before the success do not count"
        );
        let batch = [attempt("ep_1", false, 10), attempt("ep_1", true, 20), attempt("ep_2", false, 3)];
        let h = endpoint_health(&batch.iter().collect::<Vec<_>>());
        assert_eq!(
            h[0].1,
            Health { ok_at: at_of(&batch[1]), fail_at: at_of(&batch[0]), last_fail_at: at_of(&batch[0]), gone: false },
            "in time order, not batch order"
        );
        assert_eq!(
            h[1].1,
            Health { ok_at: None, fail_at: at_of(&batch[2]), last_fail_at: at_of(&batch[2]), gone: false }
        );
    }

    fn at_of(o: &Outcome) -> Option<DateTime<Utc>> {
        Some(o.attempt.as_ref().unwrap().at)
    }
}
