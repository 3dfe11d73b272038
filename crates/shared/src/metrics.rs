//! The Prometheus registry of one process and the metrics every side shares.
//!
//! Ingress and egress register their own metrics into [`Metrics::registry`]; this
//! file holds only what belongs to no side: HTTP, the Postgres pool, Redis and
//! pruning.

use prometheus::{Encoder, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// The registry plus the shared metrics.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub http_requests: IntCounterVec,
    pub db_pool_connections: IntGaugeVec,
    pub redis_errors: IntCounter,
    /// Requests refused by a tenant's quota, by tenant and limit.
    pub quota_rejections: IntCounterVec,
    /// Rows removed past retention, by family (`inbound_events`, `messages`,
    /// `payloads`, `idempotency_keys`).
    pub pruned_rows: IntCounterVec,
    /// Per family: estimated rows, bytes, the oldest row kept (Unix time) and how
    /// long the most overdue row has been past its retention (pruning lag).
    pub table_rows: IntGaugeVec,
    pub table_bytes: IntGaugeVec,
    pub retention_oldest: GaugeVec,
    pub retention_overdue: GaugeVec,
    /// Erasures of applications requested and not finished.
    pub erasures_pending: IntGauge,
    /// Seconds since the oldest transaction still open on the Postgres server
    /// began: FIFO and polling endpoints read nothing logged after it.
    pub sink_horizon_age: prometheus::Gauge,
    /// Per partitioned family: partitions now, made ahead, dropped past the horizon.
    pub partitions: IntGaugeVec,
    pub partitions_created: IntCounterVec,
    pub partitions_dropped: IntCounterVec,
    /// Partition maintenance that failed (each failure also logged once).
    pub partition_errors: IntCounter,
    /// Per family: how far ahead of now its partitions reach, in seconds.
    pub partitions_ahead: GaugeVec,
    /// Hosts of `DATABASE_URL` and `REDIS_URL` that have never resolved: their
    /// ports are refused to tenants at every address that is not public.
    pub own_servers_unresolved: IntGauge,
    /// Actions done whose audit entry could not be written (each also logged).
    pub audit_failures: IntCounter,
    /// Seconds the replica is behind the primary (0 caught up, -1 unreachable).
    pub replica_lag: GaugeVec,
    /// 1 while reads that tolerate staleness go to the replica.
    pub replica_in_use: IntGaugeVec,
    tenant_label: bool,
}

impl Metrics {
    /// `tenant_label: false` collapses every `tenant` label to `""`, for
    /// deployments with so many tenants that per-tenant series would be too many.
    pub fn new(tenant_label: bool) -> Self {
        let registry = Registry::new();
        let http_requests = IntCounterVec::new(
            Opts::new("hookgate_http_requests_total", "HTTP requests answered, by route pattern and status."),
            &["route", "status"],
        )
        .expect("valid metric");
        let db_pool_connections = IntGaugeVec::new(
            Opts::new(
                "hookgate_db_pool_connections",
                "Postgres pool connections by pool (main, worker) and state (idle, in_use, max).",
            ),
            &["pool", "state"],
        )
        .expect("valid metric");
        let redis_errors = IntCounter::new(
            "hookgate_redis_errors_total",
            "Redis calls that failed or timed out; Postgres decided instead.",
        )
        .expect("valid metric");
        let pruned_rows = IntCounterVec::new(
            Opts::new("hookgate_pruned_rows_total", "Rows removed past their retention, by family."),
            &["family"],
        )
        .expect("valid metric");
        registry.register(Box::new(pruned_rows.clone())).expect("registered once");
        let gauge = |name: &str, help: &str| {
            let g = IntGaugeVec::new(Opts::new(name, help), &["family"]).expect("valid metric");
            registry.register(Box::new(g.clone())).expect("registered once");
            g
        };
        let table_rows = gauge("hookgate_table_rows", "Rows of a table family (Postgres's estimate).");
        let table_bytes = gauge("hookgate_table_bytes", "Bytes of a table family, indexes and TOAST included.");
        let float = |name: &str, help: &str| {
            let g = GaugeVec::new(Opts::new(name, help), &["family"]).expect("valid metric");
            registry.register(Box::new(g.clone())).expect("registered once");
            g
        };
        let erasures_pending =
            IntGauge::new("hookgate_erasures_pending", "Erasures of applications requested and not finished.")
                .expect("valid metric");
        registry.register(Box::new(erasures_pending.clone())).expect("registered once");
        let sink_horizon_age = prometheus::Gauge::new(
            "hookgate_sink_horizon_age_seconds",
            "Seconds since the oldest transaction still open on the Postgres server began: FIFO and polling \
             endpoints read nothing logged after it.",
        )
        .expect("valid metric");
        registry.register(Box::new(sink_horizon_age.clone())).expect("registered once");
        let retention_oldest =
            float("hookgate_retention_oldest_timestamp_seconds", "Unix time of the oldest row a family keeps.");
        let retention_overdue = float(
            "hookgate_retention_overdue_seconds",
            "How long the most overdue row of a family has been past its retention (pruning lag).",
        );
        let partitions = gauge("hookgate_partitions", "Partitions a time-partitioned family has now.");
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &["family"]).expect("valid metric");
            registry.register(Box::new(c.clone())).expect("registered once");
            c
        };
        let partitions_created = counter("hookgate_partitions_created_total", "Partitions made ahead of time.");
        let partitions_dropped =
            counter("hookgate_partitions_dropped_total", "Partitions dropped whole, every row past retention.");
        let partitions_ahead = float(
            "hookgate_partitions_ahead_seconds",
            "How far ahead of now a partitioned family's partitions reach; rows past it could not be written.",
        );
        let partition_errors = IntCounter::new(
            "hookgate_partition_maintenance_errors_total",
            "Partition maintenance rounds that failed (tried again next round).",
        )
        .expect("valid metric");
        registry.register(Box::new(partition_errors.clone())).expect("registered once");
        let own_servers_unresolved = IntGauge::new(
            "hookgate_own_servers_unresolved",
            "Hosts of DATABASE_URL and REDIS_URL that have never resolved: their ports are refused to endpoints and \
             destinations at every address that is not public until they do.",
        )
        .expect("valid metric");
        registry.register(Box::new(own_servers_unresolved.clone())).expect("registered once");
        let audit_failures = IntCounter::new(
            "hookgate_audit_failures_total",
            "Actions of the operator or a tenant that were done but whose audit-log entry could not be written.",
        )
        .expect("valid metric");
        registry.register(Box::new(audit_failures.clone())).expect("registered once");
        let replica_lag = GaugeVec::new(
            Opts::new(
                "hookgate_replica_lag_seconds",
                "Seconds a read replica (label replica: its host and port) is behind the primary as this process last \
                 saw it: 0 caught up, -1 unreachable or refused.",
            ),
            &["replica"],
        )
        .expect("valid metric");
        registry.register(Box::new(replica_lag.clone())).expect("registered once");
        let replica_in_use = IntGaugeVec::new(
            Opts::new(
                "hookgate_replica_in_use",
                "1 while this process sends reads that tolerate staleness to a read replica (label replica), 0 while \
                 it is set aside.",
            ),
            &["replica"],
        )
        .expect("valid metric");
        registry.register(Box::new(replica_in_use.clone())).expect("registered once");
        registry.register(Box::new(http_requests.clone())).expect("registered once");
        registry.register(Box::new(db_pool_connections.clone())).expect("registered once");
        registry.register(Box::new(redis_errors.clone())).expect("registered once");
        let quota_rejections = IntCounterVec::new(
            Opts::new(
                "hookgate_quota_rejections_total",
                "Requests answered 429 because a tenant was over a quota, by tenant and limit.",
            ),
            &["tenant", "limit"],
        )
        .expect("valid metric");
        registry.register(Box::new(quota_rejections.clone())).expect("registered once");
        Metrics {
            quota_rejections,
            registry,
            http_requests,
            db_pool_connections,
            redis_errors,
            pruned_rows,
            table_rows,
            table_bytes,
            retention_oldest,
            retention_overdue,
            erasures_pending,
            sink_horizon_age,
            partitions,
            partitions_created,
            partitions_dropped,
            partition_errors,
            partitions_ahead,
            own_servers_unresolved,
            audit_failures,
            replica_lag,
            replica_in_use,
            tenant_label,
        }
    }

    /// The value to put in a `tenant` label.
    pub fn tenant<'a>(&self, tenant: &'a str) -> &'a str {
        if self.tenant_label {
            tenant
        } else {
            ""
        }
    }

    /// Samples the pool gauges, one set per named pool; called at scrape time.
    pub fn observe_pools(&self, pools: &[(&str, &deadpool_postgres::Pool)]) {
        // Pools of one name (a replica per host) are counted together.
        let mut sums: Vec<(&str, [i64; 3])> = Vec::new();
        for (name, pool) in pools {
            let s = pool.status();
            let (idle, size, max) = (s.available as i64, s.size as i64, s.max_size as i64);
            match sums.iter_mut().find(|(n, _)| n == name) {
                Some((_, sum)) => *sum = [sum[0] + idle, sum[1] + size - idle, sum[2] + max],
                None => sums.push((name, [idle, size - idle, max])),
            }
        }
        for (name, [idle, in_use, max]) in sums {
            self.db_pool_connections.with_label_values(&[name, "idle"]).set(idle);
            self.db_pool_connections.with_label_values(&[name, "in_use"]).set(in_use);
            self.db_pool_connections.with_label_values(&[name, "max"]).set(max);
        }
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding into a Vec does not fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}
