//! The send side's metrics (listed in `docs/operations.md`), registered into the process registry.

use hookgate_shared::{
    metrics::Metrics,
    status::{Delivery, EndpointKind},
};
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts};

#[derive(Clone)]
pub struct EgressMetrics {
    pub messages_created: IntCounterVec,
    pub attempts: IntCounterVec,
    pub duration: Histogram,
    pub lag: Histogram,
    pub pending: IntGauge,
    pub failed: IntCounter,
    pub endpoints_disabled: IntCounter,
    pub records_quarantined: IntCounter,
    pub destinations: IntCounterVec,
    pub alerts: IntCounterVec,
    pub alerts_held: IntCounterVec,
    pub broker_messages: IntCounterVec,
    pub broker_errors: IntCounterVec,
    pub broker_sources_consuming: IntGauge,
    shared: Metrics,
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

impl EgressMetrics {
    pub fn register(shared: &Metrics) -> Self {
        let m = EgressMetrics {
            messages_created: counter_vec(
                "hookgate_messages_created_total",
                "Messages accepted for delivery.",
                &["tenant"],
            ),
            attempts: counter_vec(
                "hookgate_delivery_attempts_total",
                "Delivery attempts by outcome: success, http_4xx, http_5xx, timeout, connect_error, blocked, refused, unconfirmed, auth_failed.",
                &["tenant", "outcome"],
            ),
            duration: Histogram::with_opts(
                HistogramOpts::new(
                    "hookgate_delivery_duration_seconds",
                    "Time of one delivery attempt, request to response.",
                )
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0]),
            )
            .expect("valid metric"),
            lag: Histogram::with_opts(
                HistogramOpts::new(
                    "hookgate_delivery_lag_seconds",
                    "From a delivery falling due to its attempt being sent.",
                )
                .buckets(vec![0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
            )
            .expect("valid metric"),
            pending: IntGauge::new("hookgate_deliveries_pending", "Deliveries waiting for an attempt or in flight.")
                .expect("valid metric"),
            failed: IntCounter::new(
                "hookgate_deliveries_failed_total",
                "Deliveries that ended failed after their last attempt.",
            )
            .expect("valid metric"),
            endpoints_disabled: IntCounter::new(
                "hookgate_endpoints_disabled_total",
                "Endpoints disabled automatically (410 Gone, or failing for disable_after).",
            )
            .expect("valid metric"),
            records_quarantined: IntCounter::new(
                "hookgate_delivery_records_quarantined_total",
                "Delivery results that could not be recorded after retries; their deliveries were marked failed.",
            )
            .expect("valid metric"),
            destinations: counter_vec(
                "hookgate_destination_publishes_total",
                "Hand-overs to destinations other than HTTP, by destination type and outcome.",
                &["type", "outcome"],
            ),
            alerts: counter_vec(
                "hookgate_alerts_total",
                "Alerts for people by channel (email, chat), condition and outcome: sent, retried, failed (given up), dropped (no address or SMTP server any more).",
                &["channel", "condition", "outcome"],
            ),
            alerts_held: counter_vec(
                "hookgate_alerts_debounced_total",
                "Conditions held back by an alert's window, told as a count in the next alert sent.",
                &["condition"],
            ),
            broker_messages: counter_vec(
                "hookgate_broker_messages_total",
                "Broker source messages by type and outcome: published, duplicate (a redelivered copy), dead_lettered (set aside), held (given back for later: a quota, creation held back).",
                &["type", "outcome"],
            ),
            broker_errors: counter_vec(
                "hookgate_broker_source_errors_total",
                "Broker source connections or reads that failed, by type.",
                &["type"],
            ),
            broker_sources_consuming: IntGauge::new(
                "hookgate_broker_sources_consuming",
                "Broker sources this process consumes now.",
            )
            .expect("valid metric"),
            shared: shared.clone(),
        };
        let r = &shared.registry;
        r.register(Box::new(m.messages_created.clone())).expect("registered once");
        r.register(Box::new(m.attempts.clone())).expect("registered once");
        r.register(Box::new(m.duration.clone())).expect("registered once");
        r.register(Box::new(m.lag.clone())).expect("registered once");
        r.register(Box::new(m.pending.clone())).expect("registered once");
        r.register(Box::new(m.failed.clone())).expect("registered once");
        r.register(Box::new(m.endpoints_disabled.clone())).expect("registered once");
        r.register(Box::new(m.records_quarantined.clone())).expect("registered once");
        r.register(Box::new(m.destinations.clone())).expect("registered once");
        r.register(Box::new(m.alerts.clone())).expect("registered once");
        r.register(Box::new(m.alerts_held.clone())).expect("registered once");
        r.register(Box::new(m.broker_messages.clone())).expect("registered once");
        r.register(Box::new(m.broker_errors.clone())).expect("registered once");
        r.register(Box::new(m.broker_sources_consuming.clone())).expect("registered once");
        // Present from the start (at 0), so a dashboard or an alert reading it
        // finds the series before the first hand-over.
        let sent = |k: &EndpointKind| matches!(k.delivery(), Delivery::HandOver | Delivery::Batches);
        for kind in EndpointKind::ALL.iter().filter(|k| sent(k)).filter_map(|k| k.type_name()) {
            m.destinations.with_label_values(&[kind, "success"]);
        }
        m
    }

    pub fn message_created(&self, tenant: &str) {
        self.messages_created.with_label_values(&[self.shared.tenant(tenant)]).inc();
    }

    /// A hand-over to a destination (its attempt is counted by [`Self::attempt`] too).
    pub fn destination(&self, kind: &str, outcome: &str) {
        self.destinations.with_label_values(&[kind, outcome]).inc();
    }

    /// One alert's end (`outcome`) on `channel`.
    pub fn alert(&self, channel: &str, condition: &str, outcome: &str) {
        self.alerts.with_label_values(&[channel, condition, outcome]).inc();
    }

    pub fn attempt(&self, tenant: &str, outcome: &str) {
        self.attempts.with_label_values(&[self.shared.tenant(tenant), outcome]).inc();
    }
}
