//! `GET`/`PATCH /api/v1/alert-settings`: who is told when an endpoint is
//! disabled, fails for a while or exhausts a message's attempts (e-mail
//! addresses, a chat webhook), which of those, after how long and how often.
//! The same routes under `/admin/v1` are the operator's, told of every tenant.

use actix_web::{get, patch, web, HttpResponse};
use hookgate_shared::{
    db,
    http::ApiError,
    ids::TenantId,
    store::{
        alert_settings::{self, chat_purpose, AlertSettings, SettingsPatch, FAILING_SECS, WINDOW_SECS},
        alerts::Condition,
    },
    AppState,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use super::{
    endpoint::crud::{allowed, check_url},
    operational::{Admin, OpTenant},
    validate,
};
use crate::Maybe;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_settings).service(patch_settings);
}

pub fn configure_admin(cfg: &mut ServiceConfig) {
    cfg.service(Admin(get_settings)).service(Admin(patch_settings));
}

/// The longest a chat webhook URL may be.
const MOST_URL: usize = 2048;
/// Minutes `failingMinutes` and `windowMinutes` may be, at most: a week (marks
/// older than that are forgotten).
const MOST_MINUTES: u32 = 7 * 24 * 60;

/// A change to the alert settings: an absent field is left alone, `null` clears
/// it (back to the default).
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = AlertSettingsPatch)]
struct SettingsIn {
    /// Comma-separated addresses told by e-mail.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    email: Maybe<String>,
    /// A Slack-compatible incoming-webhook URL (`{"text": …}` is posted to it).
    /// Kept sealed; shown only as its scheme and host.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    chat_url: Maybe<String>,
    /// The conditions told: `endpoint.disabled`, `endpoint.failing`,
    /// `message.attempt.exhausted`, `source.stalled`. `null`: all.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    events: Maybe<Vec<String>>,
    /// How long an endpoint fails (no success) before `endpoint.failing` is told.
    #[serde(default)]
    #[schema(value_type = Option<u32>)]
    failing_minutes: Maybe<u32>,
    /// At most one alert per condition and endpoint in this long, 5 to 10080.
    #[serde(default)]
    #[schema(value_type = Option<u32>)]
    window_minutes: Maybe<u32>,
}

/// The alert settings in effect.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = AlertSettingsOut)]
struct SettingsOut {
    email: Option<String>,
    /// The chat webhook's scheme and host, then `/…`; never the whole URL.
    chat_url: Option<String>,
    events: Vec<String>,
    failing_minutes: i32,
    window_minutes: i32,
    /// Whether the operator configured an SMTP server: without one no e-mail goes.
    smtp_configured: bool,
}

/// `s` as in effect: where it sets no timing, the operator's (`op`), else the default.
fn out(state: &AppState, tenant: &TenantId, s: &AlertSettings, op: Option<&AlertSettings>) -> SettingsOut {
    let shown = s.chat_url_sealed.as_ref().map(|sealed| {
        let opened = state.config.master_key.tenant_key(tenant).open(&chat_purpose(tenant), sealed).ok();
        let url = opened.and_then(|p| url::Url::parse(std::str::from_utf8(&p).ok()?).ok());
        url.map_or_else(|| "…".to_owned(), |u| format!("{}://{}/…", u.scheme(), u.host_str().unwrap_or("")))
    });
    SettingsOut {
        email: s.email.clone(),
        chat_url: shown,
        events: s.events.clone().unwrap_or_else(|| Condition::ALL.iter().map(|c| c.as_str().to_owned()).collect()),
        failing_minutes: s.failing_secs.or(op.and_then(|o| o.failing_secs)).unwrap_or(FAILING_SECS) / 60,
        window_minutes: s.window_secs.or(op.and_then(|o| o.window_secs)).unwrap_or(WINDOW_SECS) / 60,
        smtp_configured: state.config.smtp.is_some(),
    }
}

/// The alert settings (defaults where none were set).
#[utoipa::path(tag = "Alerts", operation_id = "hookgate.alert-settings.get", responses((status = 200, body = SettingsOut)))]
#[get("/alert-settings")]
async fn get_settings(who: OpTenant, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let conn = db::conn(&state.db).await?;
    let (own, op) = alert_settings::with_operator(&**conn, &who.0).await?;
    Ok(HttpResponse::Ok().json(out(&state, &who.0, &own.unwrap_or_default(), op.as_ref())))
}

fn minutes(field: &str, m: Maybe<u32>, least: u32) -> Result<Option<Option<i32>>, ApiError> {
    let given = m.into_update();
    if let Some(Some(v)) = given {
        if v < least || v > MOST_MINUTES {
            return Err(ApiError::Validation(format!("`{field}` must be {least} to {MOST_MINUTES}")));
        }
    }
    Ok(given.map(|v| v.map(|m| (m * 60) as i32)))
}

/// Changes the alert settings; answers them as now in effect.
#[utoipa::path(tag = "Alerts", operation_id = "hookgate.alert-settings.patch", request_body = SettingsIn, responses((status = 200, body = SettingsOut)))]
#[patch("/alert-settings")]
async fn patch_settings(
    who: OpTenant,
    state: web::Data<AppState>,
    body: web::Json<SettingsIn>,
) -> Result<HttpResponse, ApiError> {
    let tenant = &who.0;
    let body = body.into_inner();
    let email = match body.email.into_update() {
        Some(Some(e)) => Some(validate::emails("email", &e)?),
        other => other.map(|_| None),
    };
    let events = match body.events.into_update() {
        Some(Some(list)) => {
            for e in &list {
                if Condition::parse(e).is_none() {
                    let known: Vec<&str> = Condition::ALL.iter().map(|c| c.as_str()).collect();
                    return Err(ApiError::Validation(format!(
                        "`events`: `{}` is not one of {}",
                        e.chars().take(64).collect::<String>(),
                        known.join(", ")
                    )));
                }
            }
            let mut list = list;
            list.sort();
            list.dedup();
            Some(Some(list))
        }
        other => other,
    };
    let chat_url_sealed = match body.chat_url.into_update() {
        Some(Some(url)) => {
            if url.len() > MOST_URL {
                return Err(ApiError::Validation(format!("`chatUrl` is at most {MOST_URL} bytes")));
            }
            // Checked as an endpoint's URL is: http(s), and not aimed at a blocked address.
            check_url(&allowed(&state, tenant).await?, &url)
                .map_err(|e| ApiError::Validation(e.to_string().replacen("`url`", "`chatUrl`", 1)))?;
            let key = state.config.master_key.tenant_key(tenant);
            Some(Some(key.seal(&chat_purpose(tenant), url.as_bytes())))
        }
        other => other.map(|_| None),
    };
    let p = SettingsPatch {
        email,
        chat_url_sealed,
        events,
        failing_secs: minutes("failingMinutes", body.failing_minutes, 1)?,
        // At least five minutes: one endpoint cannot make an inbox a minute.
        window_secs: minutes("windowMinutes", body.window_minutes, 5)?,
    };
    let conn = db::conn(&state.db).await?;
    let s = alert_settings::patch(&**conn, tenant, &p).await?;
    let (_, op) = alert_settings::with_operator(&**conn, tenant).await?;
    Ok(HttpResponse::Ok().json(out(&state, tenant, &s, op.as_ref())))
}
