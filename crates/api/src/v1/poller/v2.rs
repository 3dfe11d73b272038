//! `v1.message.pollerv2.*`: a polling endpoint read by named consumers that
//! commit offsets; a poll leases what it hands out. While the lease lasts, a
//! poll of the same consumer hands out the same messages again (the lease not
//! renewed); once it passes uncommitted, the next poll hands them out again and
//! leases them anew. So two pollers sharing a consumer id get the same
//! messages, and either's commit acknowledges them: at least once, none passed
//! over if one of them dies. Leases go by the database's clock.

use actix_web::{get, http::StatusCode, post, web, HttpResponse};
use chrono::{Duration, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, EndpointId, Ref},
    store::{
        poller_v2,
        sinks::{self, Position},
        StoreError,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::idempotency::{answer_empty, RequestKey};
use crate::v1::poller::v1::{polled, sink};
use crate::v1::validate;
use crate::TenantAuth;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(consumer_poll).service(consumer_commit);
}

const DEFAULT_LIMIT: u64 = 50;
const MOST: u64 = 250;
/// A lease when the poll names none, and the longest one.
const DEFAULT_LEASE_MS: u64 = 30_000;
const LONGEST_LEASE_MS: u64 = 3_600_000;

/// Where a new consumer starts.
#[derive(Deserialize, ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
enum StartingPosition {
    Earliest,
    Latest,
}

/// `?limit=&lease_duration_ms=&starting_position=`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    /// 1 to 250; 50 by default.
    limit: Option<u64>,
    /// How long what this poll hands out is leased to the consumer (30 s by
    /// default, at most an hour; 0: no lease). A poll during a lease hands out
    /// the leased messages again and leaves the lease as it was.
    lease_duration_ms: Option<u64>,
    /// Where a consumer that has never polled starts: `earliest` (the default) or `latest`.
    #[param(inline)]
    starting_position: Option<StartingPosition>,
}

/// Svix's `PollerV2MessageOut`: a polled message and its offset, the number to commit.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PollerV2MessageOut {
    offset: i64,
    id: String,
    event_type: String,
    event_id: Option<String>,
    channels: Option<Vec<String>>,
    tags: Option<Vec<String>>,
    #[schema(value_type = Object)]
    payload: Value,
    timestamp: chrono::DateTime<Utc>,
    #[schema(value_type = Option<HashMap<String, String>>)]
    headers: Option<Value>,
    deliver_at: Option<chrono::DateTime<Utc>>,
}

/// Svix's `PollerV2PollOut`.
#[derive(Serialize, ToSchema)]
struct PollerV2PollOut {
    data: Vec<PollerV2MessageOut>,
    /// Whether the poll came to the end of what there is now.
    done: bool,
}

/// Svix's `PollerV2CommitIn`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PollerV2CommitIn {
    /// The offset of the last message handled: it and those before it are acknowledged.
    offset: u64,
}

type ConsumerPath = web::Path<(Ref<AppId>, Ref<EndpointId>, String)>;

/// Hands out the messages after what the consumer committed and leases them;
/// during a lease, the leased messages again (the lease not renewed).
#[utoipa::path(params(PollQuery), tag = "Message", operation_id = "v1.message.pollerv2.consumer-poll", responses((status = 200, body = PollerV2PollOut)))]
#[get("/app/{app_id}/polling-endpoint/{sink_id}/consumer/{consumer_id}")]
async fn consumer_poll(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: ConsumerPath,
    q: web::Query<PollQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MOST).contains(&limit) {
        return Err(ApiError::Validation(format!("`limit` must be 1 to {MOST}")));
    }
    let lease_ms = q.lease_duration_ms.unwrap_or(DEFAULT_LEASE_MS);
    if lease_ms > LONGEST_LEASE_MS {
        return Err(ApiError::Validation(format!("`lease_duration_ms` must be 0 to {LONGEST_LEASE_MS}")));
    }
    validate::uid("consumer", &path.2)?;
    let (app, sink_id, enabled) = sink(&state, &tenant, &path.0, &path.1).await?;
    if !enabled {
        // Hands out nothing; the consumer stays where it was (or is not made).
        return Ok(HttpResponse::Ok().json(PollerV2PollOut { data: Vec::new(), done: true }));
    }
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let (mut c, now) = match poller_v2::consumer(&*tx, &tenant.0, &app, &sink_id, &path.2).await? {
        Some(kept) => kept,
        None => {
            let start = match q.starting_position.unwrap_or(StartingPosition::Earliest) {
                StartingPosition::Earliest => Position::ZERO,
                StartingPosition::Latest => sinks::position_now(&*tx, &tenant.0).await?,
            };
            // Made first, then locked: a first poll beside another takes its turn.
            poller_v2::create(&*tx, &tenant.0, &app, &sink_id, &path.2, start).await?;
            poller_v2::consumer(&*tx, &tenant.0, &app, &sink_id, &path.2)
                .await?
                .ok_or_else(|| ApiError::Internal("a consumer just made is not found".into()))?
        }
    };
    let (rows, done) = match c.leased {
        // While a lease lasts, the leased messages again (the lease not renewed):
        // whichever poller holds them may commit, and none is passed if it dies.
        Some((end, until)) if until > now && end > c.committed => {
            let leased = sinks::scan(&*tx, &tenant.0, &app, &sink_id, "", c.committed, end, limit as i64).await?;
            let more = leased.looked_at >= limit as i64
                || !sinks::read(&*tx, &tenant.0, &app, &sink_id, "", end, 1, None, None).await?.is_empty();
            (leased.found, !more)
        }
        _ => {
            let rows = sinks::read(&*tx, &tenant.0, &app, &sink_id, "", c.committed, limit as i64, None, None).await?;
            // The lease runs from this poll, by the database's clock; what it hands
            // out may be committed until a later poll hands it out again.
            c.leased = rows.last().map(|last| (last.at, now + Duration::milliseconds(lease_ms as i64)));
            let done = (rows.len() as u64) < limit;
            (rows, done)
        }
    };
    let data: Vec<PollerV2MessageOut> = rows
        .into_iter()
        .map(|l| {
            let offset = l.at.seq;
            let p = polled(l);
            PollerV2MessageOut {
                offset,
                id: p.id,
                event_type: p.event_type,
                event_id: p.event_id,
                channels: p.channels,
                tags: p.tags,
                payload: p.payload,
                timestamp: p.timestamp,
                headers: p.headers,
                deliver_at: p.deliver_at,
            }
        })
        .collect();
    // The answer is made before the lease is kept: see `poller::consumer_poll`.
    let body = serde_json::to_vec(&PollerV2PollOut { data, done })
        .map_err(|e| ApiError::Internal(format!("a page did not serialise: {e}")))?;
    poller_v2::save(&*tx, &tenant.0, &app, &sink_id, &path.2, &c).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(HttpResponse::Ok().content_type("application/json").body(body))
}

/// Acknowledges the message at `offset` and every one handed out before it:
/// the consumer's next poll goes on after it. Idempotent: 204 without a change
/// for the offset committed last, or one of the 1,000 log rows before it. 422
/// for an offset not handed out to this consumer.
#[utoipa::path(tag = "Message", operation_id = "v1.message.pollerv2.consumer-commit", responses((status = 204, description = "committed")))]
#[post("/app/{app_id}/polling-endpoint/{sink_id}/consumer/{consumer_id}/commit")]
async fn consumer_commit(
    tenant: TenantAuth,
    state: web::Data<AppState>,
    path: ConsumerPath,
    body: web::Json<PollerV2CommitIn>,
    key: Option<web::ReqData<RequestKey>>,
) -> Result<HttpResponse, ApiError> {
    validate::uid("consumer", &path.2)?;
    let offset = i64::try_from(body.offset).map_err(|_| ApiError::Validation("`offset` is out of range".into()))?;
    let (app, sink_id, _) = sink(&state, &tenant, &path.0, &path.1).await?;
    let mut conn = db::conn(&state.db).await?;
    let tx = conn.transaction().await.map_err(StoreError::from)?;
    let not_out = || {
        ApiError::Validation(format!(
            "`offset`: {offset} was not handed out to consumer `{}` since its last commit",
            path.2
        ))
    };
    let (mut c, _) = poller_v2::consumer(&*tx, &tenant.0, &app, &sink_id, &path.2).await?.ok_or_else(not_out)?;
    let leased = match c.leased {
        Some((end, until)) => poller_v2::handed_out(&*tx, &tenant.0, &app, &sink_id, (c.committed, end), offset)
            .await?
            .map(|at| (at, end, until)),
        None => None,
    };
    match leased {
        Some((at, end, until)) => {
            c.committed = at;
            // All of it committed: the lease has nothing left to hold.
            c.leased = (at < end).then_some((end, until));
            poller_v2::save(&*tx, &tenant.0, &app, &sink_id, &path.2, &c).await?;
        }
        // Committed already (a commit repeated, or overtaken by a later one): nothing moves.
        None if offset == c.committed.seq
            || poller_v2::committed_already(&*tx, &tenant.0, &app, &sink_id, c.committed, offset).await? => {}
        None => return Err(not_out()),
    }
    let res = answer_empty(&*tx, &state, key.as_deref(), StatusCode::NO_CONTENT).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(res)
}
