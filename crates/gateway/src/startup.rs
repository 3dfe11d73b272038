//! Builds the server for a role: binds first (port 0 in tests), then serves until
//! SIGTERM/SIGINT, letting in-flight requests finish.

use std::net::TcpListener;

use actix_web::{
    dev::Server,
    error::JsonPayloadError,
    middleware::from_fn,
    web::{self, Data},
    App, HttpServer,
};
use hookgate_shared::{
    http::ApiError,
    prune::{drain, BATCH},
    retention_gauges,
    store::idempotency,
    Config,
};

use hookgate_egress::{
    deliver::{forward::Forwarder, Worker},
    metrics::EgressMetrics,
    publish::Publisher,
};
use hookgate_ingress::{commit::GroupCommit, metrics::IngressMetrics};

use utoipa_actix_web::AppExt;

pub use crate::role::Role;
use crate::{health, openapi, paths, telemetry, AppState};

/// A bound, not yet running server.
pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
    egress_metrics: EgressMetrics,
    /// `/metrics` on its own listener, off the public ports.
    metrics: Option<(u16, Server)>,
    /// Ingress admission, which cron sources' ticks go through too.
    group_commit: Data<GroupCommit>,
    /// Publishing, which broker sources' consumers go through too.
    publisher: Data<Publisher>,
}

impl Application {
    /// Binds `config.listen` and builds the server; nothing runs until [`run`](Self::run).
    pub fn build(config: Config, role: Role) -> anyhow::Result<Self> {
        if config.public_url.is_none() && config.trusted_proxies.is_empty() && !config.listen.ip().is_loopback() {
            // Behind a proxy that terminates TLS, links would read `http://<internal host>`
            // and URL-signing providers (Twilio, Square) would fail to verify.
            tracing::warn!(
                "neither HOOKGATE_PUBLIC_URL nor HOOKGATE_TRUSTED_PROXIES is set: source addresses and portal \
                 links use each request's own Host header and scheme; behind a proxy, set one of them"
            );
        }
        let listener = TcpListener::bind(config.listen)
            .map_err(|e| anyhow::anyhow!("cannot listen on {} (HOOKGATE_LISTEN): {e}", config.listen))?;
        let port = listener.local_addr()?.port();
        let metrics_listener = match config.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (HOOKGATE_METRICS_LISTEN): {e}"))?,
            ),
            None => None,
        };
        let shutdown = config.shutdown_timeout;
        let state = AppState::new(config)?;
        let egress_metrics = EgressMetrics::register(&state.metrics);
        let data = Data::new(state.clone());
        let egress_data = Data::new(egress_metrics.clone());
        let ingress_data = Data::new(IngressMetrics::register(&state.metrics));
        let forwarder = Data::new(Forwarder::new(state.clone(), egress_metrics.clone()));
        let group_commit = Data::new(GroupCommit::start(state.clone(), egress_metrics.clone()));
        let cron_group = group_commit.clone();
        let alerts = Data::new(hookgate_ingress::alerts::Alerts::default());
        // PayPal's certificates: fetched (allow-listed) within the egress connect timeout.
        let certificates = Data::new(hookgate_ingress::verify::Certificates::new(
            &state.config.paypal_cert_urls,
            state.config.egress_connect_timeout,
        ));
        let publisher = Data::new(Publisher::start(state.clone(), egress_metrics.clone()));
        // Broker sources publish as the API does, through the same publisher.
        let consumers = publisher.clone();
        let server = HttpServer::new(move || {
            let max_body = data.config.max_body;
            App::new()
                .into_utoipa_app()
                .map(|app| {
                    app.app_data(data.clone())
                        .app_data(egress_data.clone())
                        .app_data(ingress_data.clone())
                        .app_data(forwarder.clone())
                        .app_data(group_commit.clone())
                        .app_data(alerts.clone())
                        .app_data(certificates.clone())
                        .app_data(publisher.clone())
                        .app_data(json_config(max_body))
                        .app_data(web::PayloadConfig::new(max_body))
                        .app_data(
                            web::QueryConfig::default()
                                .error_handler(|e, _| ApiError::Validation(e.to_string()).into()),
                        )
                        .app_data(
                            web::PathConfig::default().error_handler(|e, _| ApiError::Validation(e.to_string()).into()),
                        )
                        // Paths as Svix serves them: `/api/v1/app/{app}/msg/` is `/api/v1/app/{app}/msg`.
                        .wrap(from_fn(paths::normalize))
                        .wrap(from_fn(telemetry::observe))
                })
                .configure(|cfg| openapi::routes(cfg, role))
                .into_app()
                .app_data(Data::new(role))
                // Last, as a pattern (`/docs/{_:.*}`) is tried on every request that reaches it;
                // where the API is served (the page is for the API's users).
                .configure(|cfg| {
                    if role.serves_api() {
                        cfg.service(openapi::page());
                    }
                })
                .default_service(web::to(|| async { Err::<actix_web::HttpResponse, _>(ApiError::NotFound("route")) }))
        })
        .listen(listener)?
        .shutdown_timeout(shutdown.as_secs())
        .run();
        let metrics = match metrics_listener {
            Some(listener) => {
                let metrics_port = listener.local_addr()?.port();
                let data = Data::new(state.clone());
                let server = HttpServer::new(move || App::new().app_data(data.clone()).service(health::metrics))
                    .workers(1)
                    .disable_signals()
                    .listen(listener)?
                    .run();
                Some((metrics_port, server))
            }
            None => None,
        };
        Ok(Application { port, server, state, egress_metrics, metrics, group_commit: cron_group, publisher: consumers })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port `/metrics` is served on, if it is.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics.as_ref().map(|(p, _)| *p)
    }

    /// Serves until the process is told to stop; background tasks stop with it.
    pub async fn run(self, role: Role) -> std::io::Result<()> {
        let mut background = Vec::new();
        // Every role writes rows, so every role keeps partitions made ahead; the
        // roles that prune also drop the old ones.
        background.push(tokio::spawn(maintain_partitions(self.state.clone(), role.runs_background())));
        background.push(tokio::spawn(hookgate_shared::limits::flush_loop(self.state.clone())));
        // Whether reads that tolerate staleness may go to the replica (none without
        // one); only roles that serve the API read there.
        if role.serves_api() {
            background.push(tokio::spawn(hookgate_shared::replica::watch(self.state.clone())));
        }
        if role.serves_ingress() {
            background.push(tokio::spawn(hookgate_ingress::cron::run(self.state.clone(), self.group_commit.clone())));
        }
        if role.runs_background() {
            background.push(tokio::spawn(prune_idempotency_keys(self.state.clone())));
            // The last step of an expand/contract upgrade, once the previous release has gone.
            background.push(tokio::spawn(hookgate_shared::contract::run(self.state.clone())));
            background.push(tokio::spawn(hookgate_egress::secrets::seal_stored_headers(self.state.clone())));
            background.push(tokio::spawn(Worker::new(self.state.clone(), self.egress_metrics.clone()).run()));
            background.push(tokio::spawn(hookgate_ingress::prune::run(self.state.clone())));
            background.push(tokio::spawn(hookgate_egress::prune::run(self.state.clone())));
            background.push(tokio::spawn(hookgate_egress::replay::run(self.state.clone())));
            background.push(tokio::spawn(hookgate_egress::broadcast::run(self.state.clone())));
            background
                .push(tokio::spawn(hookgate_egress::alerts::run(self.state.clone(), self.egress_metrics.clone())));
            background.push(tokio::spawn(hookgate_egress::fifo::run(self.state.clone(), self.egress_metrics.clone())));
            let publisher = self.publisher.clone().into_inner();
            background.push(tokio::spawn(hookgate_egress::consume::run(
                self.state.clone(),
                publisher,
                self.egress_metrics.clone(),
            )));
        }
        let metrics = self.metrics.map(|(_, server)| {
            let handle = server.handle();
            tokio::spawn(server);
            handle
        });
        let result = self.server.await;
        if let Some(handle) = metrics {
            handle.stop(false).await;
        }
        // In-flight deliveries are simply abandoned: their leases bring them back.
        for task in background {
            task.abort();
        }
        // The last second's tallies of refused requests and duplicates.
        if let Err(e) = self.state.limits.flush(&self.state).await {
            tracing::warn!(error = %e, "usage tallies not written at shutdown");
        }
        result
    }
}

fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default().limit(limit).error_handler(move |err, _| {
        let e = match &err {
            JsonPayloadError::Overflow { .. } | JsonPayloadError::OverflowKnownLength { .. } => {
                ApiError::TooLarge(limit)
            }
            JsonPayloadError::ContentType => ApiError::BadRequest("expected `Content-Type: application/json`".into()),
            JsonPayloadError::Deserialize(d) if d.is_data() => ApiError::Validation(d.to_string()),
            other => ApiError::BadRequest(format!("invalid JSON body: {other}")),
        };
        e.into()
    })
}

/// Partition maintenance: the coming days' partitions at once (a process that
/// starts after a long stop of every process makes today's first), then every
/// interval.
async fn maintain_partitions(state: AppState, drops: bool) {
    if let Err(e) = hookgate_shared::partitions::ensure_ahead(&state).await {
        state.metrics.partition_errors.inc();
        tracing::warn!(error = %e, "making partitions ahead failed; trying again next round");
    }
    // The partition gauges from the start, in every role (an alert reads them).
    hookgate_shared::partitions::observe(&state).await;
    hookgate_shared::partitions::run(state, drops).await
}

/// Deletes expired Idempotency-Keys in bounded batches, so no long lock is taken,
/// and samples the retention gauges.
async fn prune_idempotency_keys(state: AppState) {
    let mut tick = hookgate_shared::prune::ticks(&state);
    let ttl = state.config.idempotency_ttl;
    loop {
        tick.tick().await;
        drain(&state, "idempotency_keys", |conn| async move { idempotency::prune(&**conn, ttl, BATCH).await }).await;
        retention_gauges::observe(&state).await;
    }
}

/// What to tell an operator whose run stopped before a switch migration.
pub fn switch_message(version: &str, by: Option<chrono::DateTime<chrono::Utc>>) -> String {
    let by = by.map(|b| format!("; the previous release may go on writing until {b} (each `hookgate migrate` without --switch moves that on)")).unwrap_or_default();
    format!(
        "migration {version} is a switch that the previous release must not run through: the migrations \
         before it are applied; stop every process of the previous release, then run \
         `hookgate migrate --switch` (see docs/operations.md, Upgrades and migrations; for 0017 also docs/retention.md, \
         Upgrading to partitioned tables){by}"
    )
}

/// Runs the pending migrations. `contracts`: the contracts too, and this
/// release's endpoint kinds admitted, as the workers would, but at once; refused
/// while a process of an older release (or one unaware of a kind) is connected.
pub async fn migrate(
    config: &Config,
    switch: hookgate_shared::migrate::Switch,
    contracts: bool,
) -> anyhow::Result<hookgate_shared::migrate::Outcome> {
    use hookgate_shared::{contract, migrate, status::EndpointKind, store::endpoint_kinds};
    let (mut client, connection) = hookgate_shared::db::connect(&config.database_url, config.db_timeout)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to DATABASE_URL: {}", error_chain(&e)))?;
    let conn_task = tokio::spawn(connection);
    let outcome = async {
        refuse_unknown_kinds(endpoint_kinds::newest(&client).await?)?;
        if !contracts {
            return Ok(migrate::run(&mut client, switch).await?);
        }
        let bare = contract::bare_names(&config.database_url);
        let bare: Vec<&str> = bare.iter().map(String::as_str).collect();
        let mut older = contract::older_connected(&client, migrate::level(), &bare).await?;
        older.extend(contract::unaware_connected(&client, EndpointKind::known_up_to(), &bare).await?);
        if !older.is_empty() {
            anyhow::bail!(
                "--contracts: processes of an older release are connected ({}): stop them first, or let this \
                 release's workers apply the contracts once they are gone",
                older.join(", ")
            );
        }
        let outcome =
            migrate::run_list(&mut client, migrate::MIGRATIONS, None, switch, migrate::Contracts::Apply).await?;
        endpoint_kinds::admit(&client).await?;
        Ok(outcome)
    }
    .await;
    drop(client);
    let _ = conn_task.await;
    outcome
}

/// A run stopped before a contract migration. This release's own contracts (the
/// last of its migrations) are not an error: the workers apply it once the previous release has gone. One
/// with this release's migrations after it is: the previous upgrade's contract
/// has not run yet, and this release must not serve without the migrations it
/// holds back.
pub fn contract_pending(version: &str) -> anyhow::Result<()> {
    use hookgate_shared::migrate::{CONTRACT, MIGRATIONS};
    // A release's contracts come after all its expand steps: only contracts may follow.
    let mut after = MIGRATIONS.iter().skip_while(|(v, _)| *v != version).skip(1);
    if after.all(|(_, sql)| sql.starts_with(CONTRACT)) {
        println!(
            "contract migration {version} pending: the workers apply it by themselves once no process of an older \
             release has been connected for HOOKGATE_CONTRACT_GRACE_SECS"
        );
        return Ok(());
    }
    anyhow::bail!(
        "contract migration {version}, the last step of the previous upgrade, has not run yet, and this release's \
         migrations come after it: let the previous release's workers apply it (they do once no older process has \
         been connected for HOOKGATE_CONTRACT_GRACE_SECS), then run `hookgate migrate` again; or, with every \
         process of the older releases stopped (an upgrade across several releases at once), run \
         `hookgate migrate --contracts`"
    )
}

/// Refuses to serve on a database whose switch migrations, or any of this
/// release's other migrations but its contracts, are not applied (this release's
/// queries need them); a Postgres that does not answer is no reason to
/// refuse: the process starts and becomes ready when it does.
pub async fn check_schema(config: &Config) -> anyhow::Result<()> {
    let connected = hookgate_shared::db::connect(&config.database_url, config.db_timeout).await;
    let Ok((client, connection)) = connected else { return Ok(()) };
    let conn_task = tokio::spawn(connection);
    let switches = hookgate_shared::migrate::pending_switches(&client).await;
    let expands = hookgate_shared::migrate::pending_expands(&client).await;
    let newest_kind = hookgate_shared::store::endpoint_kinds::newest(&client).await;
    drop(client);
    let _ = conn_task.await;
    refuse_unknown_kinds(newest_kind.ok().flatten())?;
    if let Ok(p) = switches.as_deref() {
        if let Some(first) = p.first() {
            anyhow::bail!("{}", switch_message(first, None));
        }
    }
    match expands {
        Ok(p) if !p.is_empty() => anyhow::bail!(
            "migration {} of this release is not applied: run `hookgate migrate` with this release first \
             (docs/operations.md, Upgrades and migrations)",
            p[0]
        ),
        _ => Ok(()),
    }
}

/// Fails the start when Postgres answers but TLS to it cannot be set up (a refused
/// certificate, a server that does not offer TLS under `sslmode=require`): that
/// is a configuration error, not an outage. A Postgres that does not answer at
/// all is not an error here: the process starts and becomes ready when it does.
pub async fn check_tls(config: &Config) -> anyhow::Result<()> {
    // Each host on its own, the replicas' too: a standby whose certificate the
    // settings refuse is found now, not at the failover.
    let urls = [
        Some(("DATABASE_URL", &config.database_url)),
        config.database_replica_url.as_ref().map(|u| ("HOOKGATE_DATABASE_REPLICA_URL", u)),
    ];
    for (setting, url) in urls.into_iter().flatten() {
        let answers = match hookgate_shared::db::try_each_host(url, config.db_timeout).await {
            Err(hookgate_shared::store::StoreError::Tls(e)) => anyhow::bail!("{e}"),
            // Anything else (no answer at all) is not a reason to refuse the start.
            Err(_) => continue,
            Ok(answers) => answers,
        };
        let many = answers.len() > 1;
        for (host, answer) in answers {
            match answer {
                Err(e) if is_tls_failure(&e) && many => {
                    anyhow::bail!("cannot connect to {setting}'s host {host}: {}", error_chain(&e))
                }
                Err(e) if is_tls_failure(&e) => anyhow::bail!("cannot connect to {setting}: {}", error_chain(&e)),
                Err(hookgate_shared::store::StoreError::Tls(e)) => anyhow::bail!("{e}"),
                _ => {}
            }
        }
    }
    Ok(())
}

fn is_tls_failure(e: &hookgate_shared::store::StoreError) -> bool {
    let text = error_chain(e);
    // A server without a pg_hba.conf line for us says "SSL encryption" too: that is
    // an access rule (a standby's, say), not TLS that cannot be set up.
    !text.contains("pg_hba.conf") && (text.contains("TLS") || text.contains("certificate") || text.contains("SSL"))
}

/// An error with its causes, for messages at start: a TLS failure's reason (a
/// refused certificate) sits in the source chain, not in the top message.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// Refuses to serve on a database that admits an endpoint kind this release does
/// not know (`newest`, the highest it admits): a newer release admitted it, and
/// this one would take that kind's endpoints for something else.
pub fn refuse_unknown_kinds(newest: Option<i16>) -> anyhow::Result<()> {
    let known = hookgate_shared::status::EndpointKind::known_up_to();
    match newest {
        Some(newest) if newest > known => anyhow::bail!(
            "the database admits an endpoint kind this release does not know (code {newest}; this release \
             knows up to {known}): a newer release has run on it, and this one would take that kind's \
             endpoints for something else; run the newer release (docs/operations.md, Upgrades and migrations)"
        ),
        _ => Ok(()),
    }
}
