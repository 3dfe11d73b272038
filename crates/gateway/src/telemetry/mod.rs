//! Logging and tracing set-up, and the outermost middleware: a request id on
//! every response, a tracing span per request (a child of the caller's
//! `traceparent`, if any), and `hookgate_http_requests_total`.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{header::HeaderValue, Method},
    middleware::Next,
    web, Error, HttpMessage,
};
use hookgate_shared::{config::LogFormat, trace};
use tracing::Instrument;
use tracing_subscriber::{
    filter::{filter_fn, LevelFilter},
    layer::SubscriberExt,
    util::SubscriberInitExt,
    EnvFilter, Layer,
};

use crate::AppState;

mod otel;
pub use otel::{settings as otel_settings, Otel, OtelSettings};

pub use hookgate_shared::http::REQUEST_ID;

/// Installs the global subscriber: logs to stderr (`RUST_LOG` filters, default
/// `info`) and, when the `OTEL_*` variables ask for it, spans to an OTLP
/// collector, whatever `RUST_LOG` says (quieter logs do not lose traces). Returns the exporter, to be shut down (flushed) at exit; an error
/// names the variable that is wrong. Must run outside the async runtime.
pub fn init(format: LogFormat) -> Result<Option<Otel>, String> {
    let settings = otel::settings(|name| std::env::var(name).ok())?;
    // The trace exporter's own complaints (a collector that refuses) at `warn`.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,opentelemetry=warn,opentelemetry_sdk=warn,opentelemetry_otlp=warn"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Json => fmt.json().boxed(),
        LogFormat::Text => fmt.boxed(),
    };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter));
    let (exporter, layer) = match settings {
        Some(s) => {
            let (exporter, layer) = Otel::install(&s)?;
            (Some(exporter), Some(layer.with_filter(filter_fn(otel::exported).with_max_level_hint(LevelFilter::INFO))))
        }
        None => (None, None),
    };
    // A second init (tests start many apps in one process) is harmless.
    let _ = registry.with(layer).try_init();
    Ok(exporter)
}

/// Wraps every request: id, span, metrics.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let request_id = format!("req_{}", ulid::Ulid::new());
    req.extensions_mut().insert(hookgate_shared::http::RequestId(request_id.clone()));
    // The route's pattern, never the path: a path can be a credential (a source's
    // `/in/src_…` is the whole secret of a source that checks no signature, a
    // portal link's `/portal/…` carries a token), and every log line and exported
    // span inside this one carries its fields.
    let route = req.match_pattern().unwrap_or_else(|| "unmatched".to_owned());
    let span = tracing::info_span!(
        "request",
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        id = %request_id,
        method = %req.method(),
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    if trace::enabled() {
        // Named by route pattern, as OpenTelemetry's HTTP conventions say; a method
        // outside the standard ones is `_OTHER`, so callers cannot mint span names.
        let method = match *req.method() {
            Method::GET
            | Method::POST
            | Method::PUT
            | Method::PATCH
            | Method::DELETE
            | Method::HEAD
            | Method::OPTIONS => req.method().as_str(),
            _ => "_OTHER",
        };
        span.record("otel.name", format!("{method} {route}"));
        span.record("otel.kind", "server");
        // A caller's W3C `traceparent` makes this request part of its trace.
        let parent = req.headers().get(trace::TRACEPARENT).and_then(|v| v.to_str().ok());
        trace::set_parent(&span, parent);
    }
    // Middleware below answers its refusals as responses; an `Err` (actix's own, or
    // the API's deadline) is answered by actix from the error, and counted here.
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let mut res = match next.call(req).instrument(span.clone()).await {
        Ok(res) => res.map_into_boxed_body(),
        Err(e) => {
            let status = e.as_response_error().status_code();
            record_status(&span, status);
            if let Some(state) = state {
                state.metrics.http_requests.with_label_values(&["unanswered", status.as_str()]).inc();
            }
            // Answered with the same body, and the request id every answer carries.
            let mut answer = e.error_response();
            answer.headers_mut().insert(REQUEST_ID, HeaderValue::from_str(&request_id).expect("ids are ASCII"));
            return Err(actix_web::error::InternalError::from_response(e.to_string(), answer).into());
        }
    };
    res.headers_mut().insert(REQUEST_ID, HeaderValue::from_str(&request_id).expect("ids are ASCII"));
    record_status(&span, res.status());
    if let Some(state) = res.request().app_data::<web::Data<AppState>>() {
        state.metrics.http_requests.with_label_values(&[route.as_str(), res.status().as_str()]).inc();
    }
    Ok(res)
}

/// The answer's status on the request span; a 5xx marks it as an error (a 4xx is
/// the caller's, as OpenTelemetry's HTTP conventions say for servers).
fn record_status(span: &tracing::Span, status: actix_web::http::StatusCode) {
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
}
