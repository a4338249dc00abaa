//! `svc-api`: serve the API, migrate the database, or run an operator command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;
use svc_api::App;
use svc_api::admin::{self, AdminCommand};
use svc_api::config::{DatabaseArgs, ServeConfig};
use svc_core::runtime;

#[derive(Parser)]
#[command(name = "svc-api", version, about = "The svc API: tenant operations over HTTP and MCP.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves the API until SIGTERM or SIGINT.
    Serve(Box<ServeConfig>),
    /// Applies the database migrations and exits.
    Migrate(DatabaseArgs),
    /// Operator commands; each prints one JSON object.
    Admin {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(subcommand)]
        command: AdminCommand,
    },
}

/// Request handling allocates many small, short-lived objects across threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    runtime::init_logging();
    let cli = Cli::parse();
    match run(cli.command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{}", svc_core::error::chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(config) => {
            let database = &config.database;
            let pool =
                runtime::connect(database.url(), "svc-api", database.database_max_connections, database.timeouts())?;
            let app = App::build(&config, pool).await?;
            tracing::info!(addr = %app.local_addr()?, base_url = %app.public_base_url, "svc-api listening");
            app.run_until(runtime::shutdown_signal()).await;
            Ok(())
        }
        Command::Migrate(database) => {
            let pool = runtime::connect_unbounded(database.url(), 2)?;
            runtime::MIGRATOR.run(&pool).await?;
            let applied = runtime::MIGRATOR.iter().count();
            println!("{}", json!({ "migrated": true, "migrations": applied }));
            Ok(())
        }
        Command::Admin { database, command } => {
            let pool = runtime::connect_unbounded(database.url(), 2)?;
            let output = admin::run(&pool, command).await?;
            println!("{output}");
            Ok(())
        }
    }
}
