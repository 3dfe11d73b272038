//! W3C trace context carried through the database: the span that creates a
//! message hands its `traceparent` to the row, and the span that delivers it, in
//! whichever process claims it, takes that as its parent.
//!
//! Off (the default) these do nothing and store nothing: the binary turns them on
//! only when it installs an OpenTelemetry exporter.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicBool, Ordering},
    time::SystemTime,
};

/// Span attributes, for [`finished_span`].
pub use opentelemetry::KeyValue;
use opentelemetry::{
    global,
    propagation::Extractor,
    trace::{TraceContextExt, Tracer},
    Context,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The header (and column) name.
pub const TRACEPARENT: &str = "traceparent";

/// An `info` span that exists only while tracing is on; off, it is
/// `Span::none()`, which costs nothing and leaves the logs as they were.
#[macro_export]
macro_rules! otel_span {
    ($($arg:tt)*) => {
        if $crate::trace::enabled() { ::tracing::info_span!($($arg)*) } else { ::tracing::Span::none() }
    };
}

/// Called once by the binary after it installs the OpenTelemetry layer and the
/// W3C propagator as the global one.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The current span's `traceparent`, to be stored with what it creates; `None`
/// when tracing is off or the span is not sampled into a trace.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of the remote span a `traceparent` names (a request's
/// header, a stored row). An absent or malformed value leaves `span` as it is:
/// a trace header never refuses a request.
pub fn set_parent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(value) = traceparent.filter(|_| enabled()) else { return };
    let cx = global::get_text_map_propagator(|p| p.extract(&One(value)));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Links `span` to the span a `traceparent` names: a batch to the requests it
/// serves, an attempt to the claim that picked it up.
pub fn add_link(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(value) = traceparent.filter(|_| enabled()) else { return };
    let cx = global::get_text_map_propagator(|p| p.extract(&One(value)));
    let linked = cx.span().span_context().clone();
    if linked.is_valid() {
        span.add_link(linked);
    }
}

/// Records, as a root span, work that has already finished (from `started` to
/// now), and returns its `traceparent` for others to link to. For a worker's
/// claims: only a claim that found work gets a span, which is known only after.
pub fn finished_span(name: &'static str, started: SystemTime, attributes: Vec<KeyValue>) -> Option<String> {
    if !enabled() {
        return None;
    }
    let tracer = global::tracer("hookgate");
    let span = tracer
        .span_builder(name)
        .with_start_time(started)
        .with_attributes(attributes)
        .start_with_context(&tracer, &Context::new());
    let cx = Context::new().with_span(span);
    let mut carrier = HashMap::new();
    global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    cx.span().end();
    carrier.remove(TRACEPARENT)
}

/// A carrier holding one `traceparent`.
struct One<'a>(&'a str);

impl Extractor for One<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == TRACEPARENT).then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}
