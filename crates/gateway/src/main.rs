//! The `hookgate` command: `serve`, `migrate`, `tenant …`, `import …`, `archive …`.

mod archive_cli;
mod import_cli;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use hookgate_gateway::{startup, AppState, Application, Role};
use hookgate_shared::{
    db,
    ids::TenantId,
    migrate::Switch,
    store::{api_keys, tenants},
    Config,
};

#[derive(Parser)]
#[command(name = "hookgate", version, about = "Multi-tenant webhook gateway")]
struct Cli {
    /// TOML configuration file; environment variables override it.
    #[arg(long, global = true, env = "HOOKGATE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP and run background work for a role.
    Serve {
        #[arg(long, value_enum, default_value = "all")]
        role: Role,
        /// Apply pending migrations before serving (a switch only on a new database).
        #[arg(long)]
        migrate: bool,
    },
    /// Apply pending database migrations; safe to run from several processes at once.
    /// On a database in use, stops before a switch migration unless --switch, and
    /// before a contract migration unless --contracts.
    Migrate {
        /// Apply a switch migration too: every process of the previous release is stopped.
        #[arg(long)]
        switch: bool,
        /// Apply contract migrations (and admit new endpoint kinds) too, as the workers
        /// would: every process of an older release is stopped. Refused while one is connected.
        #[arg(long)]
        contracts: bool,
    },
    /// Manage tenants, as the admin API does.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Copy configuration from elsewhere into a tenant.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Read the cold archive of dropped partitions (needs no database).
    #[command(subcommand)]
    Archive(archive_cli::ArchiveCommand),
    /// Print the OpenAPI document of every route (what `/openapi.json` serves;
    /// needs no database), e.g. to generate a client from.
    Openapi,
    /// Runs endpoint transformations for a Hookgate process, one job per line on
    /// stdin: started by Hookgate itself, with no environment.
    #[command(name = "transform-sandbox", hide = true)]
    TransformSandbox {
        /// Confines itself as a child does, and prints what it could do before
        /// and after (one line of JSON): what the tests hold the sandbox to.
        #[arg(long)]
        probe: bool,
    },
}

#[derive(Subcommand)]
enum ImportCommand {
    /// A Svix environment over its API: event types, applications, endpoints
    /// with their signing secrets, headers, filters, throttles and metadata.
    /// Run again, it updates what it made; it prints what it could not carry.
    Svix(import_cli::SvixImport),
    /// A document of `environment/export`, whichever tenant exported it: its
    /// sealed secrets open with this installation's HOOKGATE_TRANSIT_KEY.
    Environment(import_cli::EnvironmentImport),
}

#[derive(Subcommand)]
enum TenantCommand {
    /// Create a tenant and print it with its first API key (shown only once).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        uid: Option<String>,
    },
    /// List tenants.
    List,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Command::TransformSandbox { probe } = cli.command {
        let done = if probe { hookgate_egress::sandbox::probe() } else { hookgate_egress::sandbox::serve() };
        return match done {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(_) => std::process::ExitCode::FAILURE,
        };
    }
    // Holding the master key: no core file, and no process of the same user
    // (a sandbox child that got out) reads its memory or environment.
    hookgate_egress::sandbox::protect_parent();
    if let Command::Openapi = cli.command {
        println!("{}", hookgate_gateway::openapi::document(Role::All));
        return std::process::ExitCode::SUCCESS;
    }
    if let Command::Archive(cmd) = cli.command {
        return match actix_web::rt::System::new().block_on(archive_cli::run(cmd)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hookgate: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hookgate: configuration error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let exporter = match hookgate_gateway::telemetry::init(config.log_format) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("hookgate: configuration error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = actix_web::rt::System::new().block_on(run(cli.command, config));
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookgate: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Serve { role, migrate } => {
            // A misconfigured archive stops the start, not the first drop weeks later.
            if let Some(url) = &config.archive_url {
                hookgate_shared::archive::Archive::open(url)?;
            }
            if migrate {
                let outcome = startup::migrate(&config, Switch::Hold, false).await?;
                if let Some(version) = outcome.stopped_at {
                    anyhow::bail!("{}", startup::switch_message(version, outcome.switch_by));
                }
                if let Some(version) = outcome.contract_pending {
                    startup::contract_pending(version)?;
                }
            } else {
                startup::check_tls(&config).await?;
                startup::check_schema(&config).await?;
            }
            let app = Application::build(config, role)?;
            tracing::info!(port = app.port(), metrics_port = ?app.metrics_port(), ?role, "hookgate serving");
            app.run(role).await?;
        }
        Command::Migrate { switch, contracts } => {
            let switch = if switch { Switch::Apply } else { Switch::Hold };
            let outcome = startup::migrate(&config, switch, contracts).await?;
            if outcome.applied.is_empty() {
                println!("migrations up to date ({} applied before)", outcome.already);
            } else {
                println!("applied {} migration(s): {}", outcome.applied.len(), outcome.applied.join(", "));
            }
            if let Some(version) = outcome.stopped_at {
                anyhow::bail!("{}", startup::switch_message(version, outcome.switch_by));
            }
            if let Some(version) = outcome.contract_pending {
                startup::contract_pending(version)?;
            }
        }
        Command::Tenant(cmd) => tenant(cmd, config).await?,
        Command::Import(ImportCommand::Svix(args)) => import_cli::run(args, AppState::new(config)?).await?,
        Command::Import(ImportCommand::Environment(args)) => {
            import_cli::run_environment(args, AppState::new(config)?).await?
        }
        Command::Archive(_) | Command::Openapi => unreachable!("runs without the configuration, in main"),
        Command::TransformSandbox { .. } => unreachable!("runs without the configuration, in main"),
    }
    Ok(())
}

async fn tenant(cmd: TenantCommand, config: Config) -> anyhow::Result<()> {
    let state = AppState::new(config)?;
    let mut conn = db::conn(&state.db).await.context("cannot reach Postgres (DATABASE_URL)")?;
    match cmd {
        TenantCommand::Create { name, uid } => {
            // The admin API's checks: a `tnt_…` uid would be taken for a tenant id.
            hookgate_shared::ids::check_tenant_name(&name).map_err(anyhow::Error::msg)?;
            if let Some(uid) = &uid {
                hookgate_shared::ids::check_tenant_uid(uid).map_err(anyhow::Error::msg)?;
            }
            let tx = conn.transaction().await?;
            let id = TenantId::generate();
            let tenant = tenants::insert(&*tx, &id, &name, uid.as_deref()).await?;
            let key = api_keys::issue(&*tx, &id, &state.api_keys, None).await?;
            tx.commit().await?;
            let out = serde_json::json!({
                "id": tenant.id, "name": tenant.name, "uid": tenant.uid,
                "apiKey": key.key, "apiKeyId": key.id, "createdAt": tenant.created_at,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        TenantCommand::List => {
            let mut page = hookgate_shared::store::page::PageRequest::new(Some(250), None);
            loop {
                let p = tenants::list(&**conn, &page).await?;
                for t in &p.data {
                    println!("{}\t{}\t{}", t.id, t.name, if t.disabled { "disabled" } else { "enabled" });
                }
                if p.done {
                    break;
                }
                page = hookgate_shared::store::page::PageRequest::following(250, p.iterator);
            }
        }
    }
    Ok(())
}
