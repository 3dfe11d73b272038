//! Usage an agency can bill from: per tenant and UTC day, `GET /api/v1/usage`
//! for the tenant itself and `GET /admin/v1/tenant/{id}/usage` for the
//! operator; JSON, or CSV with `Accept: text/csv`.

use actix_web::{get, http::header, web, HttpRequest, HttpResponse};
use chrono::{Datelike, Days, NaiveDate, Utc};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::{Ref, TenantId},
    store::usage::{self, UsageDay},
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::{KeyAuth, Operator};

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(own_usage);
}

/// The longest range one request may ask for.
const MAX_DAYS: u64 = 366;

/// `?from=&to=`: the days asked for, both included; the last 30 by default.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Range {
    /// The first day, `YYYY-MM-DD` (default: 29 days before `to`).
    #[param(format = Date)]
    from: Option<String>,
    /// The last day, `YYYY-MM-DD` (default: today, UTC).
    #[param(format = Date)]
    to: Option<String>,
}

/// The usage, one entry per UTC day that has any, oldest first.
#[derive(Serialize, ToSchema)]
struct UsageOut {
    data: Vec<UsageDay>,
}

impl Range {
    /// `from` and `to` as dates (both included); the last 30 days by default.
    fn dates(&self) -> Result<(NaiveDate, NaiveDate), ApiError> {
        let parse = |name: &str, v: &Option<String>| -> Result<Option<NaiveDate>, ApiError> {
            v.as_deref()
                .map(|s| {
                    NaiveDate::parse_from_str(s, "%Y-%m-%d")
                        .ok()
                        // Years far off would overflow date arithmetic; none has usage.
                        .filter(|d| (2000..=9999).contains(&d.year()))
                        .ok_or_else(|| {
                            ApiError::Validation(format!(
                                "`{name}` must be a date as YYYY-MM-DD between the years 2000 and 9999, got `{s}`"
                            ))
                        })
                })
                .transpose()
        };
        let today = Utc::now().date_naive();
        let to = parse("to", &self.to)?.unwrap_or(today);
        let from = match parse("from", &self.from)? {
            Some(from) => from,
            None => to.checked_sub_days(Days::new(29)).unwrap_or(to),
        };
        if from > to {
            return Err(ApiError::Validation("`from` must not be after `to`".into()));
        }
        if (to - from).num_days() as u64 >= MAX_DAYS {
            return Err(ApiError::Validation(format!("at most {MAX_DAYS} days per request")));
        }
        Ok((from, to))
    }
}

async fn answer(
    state: &AppState,
    req: &HttpRequest,
    tenant: &TenantId,
    range: &Range,
) -> Result<HttpResponse, ApiError> {
    let (from, to) = range.dates()?;
    let days =
        db::bounded(state.db_budget(), async { state.read(async |c| usage::days(c, tenant, from, to).await).await })
            .await?;
    let wants_csv = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim().starts_with("text/csv")));
    if wants_csv {
        return Ok(HttpResponse::Ok().content_type("text/csv; charset=utf-8").body(csv(&days)));
    }
    Ok(HttpResponse::Ok().json(UsageOut { data: days }))
}

fn csv(days: &[UsageDay]) -> String {
    let mut out = String::from(
        "date,inboundAccepted,inboundDuplicates,inboundRejected,inboundRejectedSignature,inboundRejectedInvalid,\
         inboundRejectedQuota,messagesCreated,attemptsSucceeded,attemptsFailed,bytesIn,bytesOut\n",
    );
    for d in days {
        let c = &d.inbound_rejected_by_cause;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
            d.date,
            d.inbound_accepted,
            d.inbound_duplicates,
            d.inbound_rejected,
            c.signature,
            c.invalid,
            c.quota,
            d.messages_created,
            d.attempts_succeeded,
            d.attempts_failed,
            d.bytes_in,
            d.bytes_out
        ));
    }
    out
}

/// The tenant's usage per UTC day; CSV with `Accept: text/csv`.
#[utoipa::path(params(Range), tag = "Usage", operation_id = "hookgate.usage.get", responses((status = 200, content((UsageOut = "application/json"), (String = "text/csv")))))]
#[get("/usage")]
async fn own_usage(
    tenant: KeyAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    q: web::Query<Range>,
) -> Result<HttpResponse, ApiError> {
    answer(&state, &req, &tenant.0, &q).await
}

/// A tenant's usage per UTC day; CSV with `Accept: text/csv`.
#[utoipa::path(params(Range), tag = "Admin", operation_id = "admin.tenant.usage", responses((status = 200, content((UsageOut = "application/json"), (String = "text/csv")))))]
#[get("/tenant/{tenant_id}/usage")]
pub async fn tenant_usage(
    _: Operator,
    state: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<Ref<TenantId>>,
    q: web::Query<Range>,
) -> Result<HttpResponse, ApiError> {
    let tenant = crate::admin_tenant::find(&state, &id).await?;
    answer(&state, &req, &tenant.id, &q).await
}
