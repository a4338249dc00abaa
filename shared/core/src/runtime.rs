//! What both processes set up the same way: logging and the database pool.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tracing_subscriber::EnvFilter;

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as text or, with
/// `SVC_LOG_FORMAT=json`, one JSON object per line.
///
/// rmcp logs whole JSON-RPC messages at `debug` and `trace`, and a tool result can
/// carry a secret shown once (`api_key.create`): its level is capped at `info`,
/// whatever `RUST_LOG` says, so no setting writes a credential to the logs.
pub fn init_logging() {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if let Ok(cap) = "rmcp=info".parse() {
        filter = filter.add_directive(cap);
    }
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let json = std::env::var("SVC_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}

/// The database pool. Connections open on first use, so a process starts (and
/// reports itself unready) while the database is down.
pub fn connect(database_url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        // A connection is checked by using it: a ping per checkout would double
        // the round trips of every request.
        .test_before_acquire(false)
        .connect_lazy(database_url)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
