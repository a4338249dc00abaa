//! `svc-worker`: the background process. It runs until SIGTERM or SIGINT, then
//! finishes the task in hand and exits.
//!
//! Today its one job is housekeeping: deleting idempotency records past their
//! 24-hour retention. Knowledge processing joins it with the knowledge issue.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use secrecy::{ExposeSecret, SecretString};
use svc_core::runtime;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "svc-worker", version, about = "The svc worker: background jobs.")]
struct Config {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://localhost/svc", hide_env_values = true)]
    database_url: SecretString,
    /// Seconds between housekeeping sweeps.
    #[arg(long, env = "SVC_SWEEP_INTERVAL_SECS", default_value_t = 300)]
    sweep_interval_secs: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    runtime::init_logging();
    let config = Config::parse();
    let pool = match runtime::connect(config.database_url.expose_secret(), 2, runtime::Timeouts::SERVING) {
        Ok(pool) => pool,
        Err(error) => {
            tracing::error!(%error, "bad database configuration");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    let sweeper = tokio::spawn(sweep(pool, Duration::from_secs(config.sweep_interval_secs.max(1)), shutdown.clone()));
    tracing::info!("svc-worker started");
    runtime::shutdown_signal().await;
    tracing::info!("svc-worker stopping");
    shutdown.cancel();
    if let Err(error) = sweeper.await {
        tracing::error!(%error, "the sweeper ended abnormally");
        return ExitCode::FAILURE;
    }
    tracing::info!("svc-worker stopped");
    ExitCode::SUCCESS
}

/// Purges expired idempotency records now and every `interval` until shutdown.
/// A sweep in progress is finished, not abandoned, so it never leaves half work.
async fn sweep(pool: sqlx::PgPool, interval: Duration, shutdown: CancellationToken) {
    loop {
        match svc_core::housekeeping::purge_idempotency_records(&pool).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "purged expired idempotency records"),
            Err(error) => tracing::warn!(%error, "housekeeping sweep failed; retrying next interval"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
