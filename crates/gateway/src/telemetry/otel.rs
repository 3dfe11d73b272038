//! OpenTelemetry traces over OTLP/HTTP, off unless the standard variables ask for
//! them. Prometheus metrics are unaffected either way.

use opentelemetry::{global, trace::TracerProvider as _, Key};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider, Resource};

/// What the `OTEL_*` variables ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtelSettings {
    pub protocol: Protocol,
}

/// Reads the standard variables: tracing is on when `OTEL_EXPORTER_OTLP_ENDPOINT`
/// or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, unless `OTEL_SDK_DISABLED=true`
/// or `OTEL_TRACES_EXPORTER=none`. The exporter itself reads the endpoint, headers,
/// timeout and compression; the SDK the sampler, batch settings and resource.
pub fn settings(var: impl Fn(&str) -> Option<String>) -> Result<Option<OtelSettings>, String> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() {
        return Ok(None);
    }
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    match set("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(None),
        Some(other) => return Err(format!("OTEL_TRACES_EXPORTER={other} is not supported; use `otlp` or `none`")),
    }
    let (name, value) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
        Some(v) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v),
        None => ("OTEL_EXPORTER_OTLP_PROTOCOL", set("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or("http/protobuf".into())),
    };
    for name in ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] {
        if let Some(url) = set(name) {
            // The exporter would fall back to localhost on a URL it cannot read.
            let ok = url.parse::<actix_web::http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some_and(|h| !h.is_empty())
            });
            if !ok {
                return Err(format!("{name}={url} is not an http:// or https:// URL"));
            }
        }
    }
    let protocol = match value.as_str() {
        "http/protobuf" => Protocol::HttpBinary,
        "http/json" => Protocol::HttpJson,
        other => {
            return Err(format!(
                "{name}={other} is not supported; use `http/protobuf` (the default) or `http/json` (OTLP over HTTP, usually port 4318)"
            ))
        }
    };
    Ok(Some(OtelSettings { protocol }))
}

/// What becomes part of a trace: Hookgate's own spans at `info` and above (those
/// listed in `docs/operations.md`). Not log events (an error's text can quote a
/// stored row, payload included), not the libraries' spans (a connection
/// pool's, an HTTP client's), and not `RUST_LOG`'s choice, which is for logs.
pub fn exported(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && meta.target().starts_with("hookgate") && *meta.level() <= tracing::Level::INFO
}

/// The installed exporter; [`shutdown`](Self::shutdown) flushes what is queued.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// Builds the exporter and the W3C propagator, installs both globally, and
    /// returns the layer that turns `tracing` spans into OpenTelemetry spans.
    /// Must run outside the async runtime (the exporter's client blocks).
    pub fn install<S>(
        s: &OtelSettings,
    ) -> Result<(Otel, tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>), String>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(s.protocol)
            .build()
            .map_err(|e| format!("the OTLP exporter cannot be built: {e}"))?;
        // `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else
        // `hookgate` (rather than the SDK's `unknown_service`).
        let mut resource = Resource::builder().build();
        let named = resource.get(&Key::new("service.name")).is_some_and(|v| !v.as_str().starts_with("unknown_service"));
        if !named {
            resource = Resource::builder().with_service_name("hookgate").build();
        }
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        global::set_text_map_propagator(TraceContextPropagator::new());
        global::set_tracer_provider(provider.clone());
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("hookgate"));
        hookgate_shared::trace::enable();
        Ok((Otel { provider }, layer))
    }

    /// Exports what is still queued, within the exporter's own timeout.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("hookgate: flushing traces failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<OtelSettings>, String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        settings(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn tracing_is_off_without_an_endpoint() {
        assert_eq!(read(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]), Ok(None));
    }

    #[test]
    fn an_endpoint_turns_tracing_on_with_protobuf_by_default() {
        let got = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]).unwrap();
        assert_eq!(got, Some(OtelSettings { protocol: Protocol::HttpBinary }));
    }

    #[test]
    fn the_traces_protocol_wins_over_the_general_one() {
        let got = read(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ])
        .unwrap();
        assert_eq!(got, Some(OtelSettings { protocol: Protocol::HttpJson }));
    }

    #[test]
    fn grpc_is_refused_with_the_variable_named() {
        let err = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4317"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])
            .unwrap_err();
        assert!(err.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "{err}");
    }

    #[test]
    fn an_endpoint_that_is_no_url_is_refused_with_the_variable_named() {
        for bad in ["collector:4318", "ftp://collector", "http://"] {
            let err = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", bad)]).unwrap_err();
            assert!(err.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_sdk_switches_disable_tracing() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(read(&[on, ("OTEL_SDK_DISABLED", "true")]), Ok(None));
        assert_eq!(read(&[on, ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
        assert!(read(&[on, ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
    }
}
