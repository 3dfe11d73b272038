//! Logging set-up and the outermost middleware: a request id on every response,
//! a tracing span per request, and `hookgate_http_requests_total`.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::header::HeaderValue,
    middleware::Next,
    web, Error,
};
use hookgate_shared::config::LogFormat;
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

use crate::AppState;

pub use hookgate_shared::http::REQUEST_ID;

/// Installs the global subscriber; `RUST_LOG` filters, default `info`.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests start many apps in one process) is harmless.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Wraps every request: id, span, metrics.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let request_id = format!("req_{}", ulid::Ulid::new());
    let span = tracing::info_span!("request", id = %request_id, method = %req.method(), path = %req.path());
    // Middleware below answers its refusals as responses; an `Err` (actix's own, or
    // the API's deadline) is answered by actix from the error, and counted here.
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let mut res = match next.call(req).instrument(span).await {
        Ok(res) => res.map_into_boxed_body(),
        Err(e) => {
            if let Some(state) = state {
                let status = e.as_response_error().status_code();
                state.metrics.http_requests.with_label_values(&["unanswered", status.as_str()]).inc();
            }
            // Answered with the same body, and the request id every answer carries.
            let mut answer = e.error_response();
            answer.headers_mut().insert(REQUEST_ID, HeaderValue::from_str(&request_id).expect("ids are ASCII"));
            return Err(actix_web::error::InternalError::from_response(e.to_string(), answer).into());
        }
    };
    res.headers_mut().insert(REQUEST_ID, HeaderValue::from_str(&request_id).expect("ids are ASCII"));
    if let Some(state) = res.request().app_data::<web::Data<AppState>>() {
        let route = res.request().match_pattern().unwrap_or_else(|| "unmatched".to_owned());
        state.metrics.http_requests.with_label_values(&[route.as_str(), res.status().as_str()]).inc();
    }
    Ok(res)
}
