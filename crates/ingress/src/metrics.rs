//! The receive side's metrics (listed in `docs/operations.md`), registered into the process registry.

use hookgate_shared::metrics::Metrics;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts};

#[derive(Clone)]
pub struct IngressMetrics {
    pub requests: IntCounterVec,
    pub duplicates: IntCounterVec,
    pub duration: Histogram,
    shared: Metrics,
}

impl IngressMetrics {
    pub fn register(shared: &Metrics) -> Self {
        let m = IngressMetrics {
            requests: IntCounterVec::new(
                Opts::new(
                    "hookgate_ingress_requests_total",
                    "Provider requests by outcome: accepted, duplicate, invalid_signature, bad_request, too_large, \
                     unavailable, conflict, forward_failed.",
                ),
                // No `source`: a source's id is the whole credential of one that checks
                // no signature, and labels reach whoever can scrape or query Prometheus.
                &["tenant", "outcome"],
            )
            .expect("valid metric"),
            duplicates: IntCounterVec::new(
                Opts::new(
                    "hookgate_ingress_duplicates_total",
                    "Duplicates answered, by the layer that knew: redis or postgres.",
                ),
                &["layer"],
            )
            .expect("valid metric"),
            duration: Histogram::with_opts(
                HistogramOpts::new("hookgate_ingress_request_duration_seconds", "Time to answer a provider request.")
                    .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0]),
            )
            .expect("valid metric"),
            shared: shared.clone(),
        };
        let r = &shared.registry;
        r.register(Box::new(m.requests.clone())).expect("registered once");
        r.register(Box::new(m.duplicates.clone())).expect("registered once");
        r.register(Box::new(m.duration.clone())).expect("registered once");
        m
    }

    pub fn request(&self, tenant: &str, outcome: &str) {
        self.requests.with_label_values(&[self.shared.tenant(tenant), outcome]).inc();
    }
}
