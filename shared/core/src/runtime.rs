//! What both processes set up the same way: logging and the database pool.

pub mod warm;

use std::time::Duration;

use std::str::FromStr;

use sqlx::migrate::Migrator;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use tracing::{Level, Metadata};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

/// What is logged without `RUST_LOG`: our crates at `info`, libraries (rmcp,
/// sqlx, apalis, hyper, ...) only when they warn.
pub const DEFAULT_LOG_FILTER: &str = "warn,svc_api=info,svc_core=info,svc_worker=info";

/// Logs to stderr, filtered by `RUST_LOG` (default [`DEFAULT_LOG_FILTER`]), as
/// text or, with `SVC_LOG_FORMAT=json`, one JSON object per line.
pub fn init_logging() {
    let env = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let json = std::env::var("SVC_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let layer = if json {
        fmt::layer().json().with_writer(std::io::stderr).boxed()
    } else {
        fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed()
    };
    let _ = tracing_subscriber::registry().with(env).with(layer.with_filter(filter_fn(never_secret))).try_init();
}

/// rmcp logs whole JSON-RPC messages at `debug` and `trace`, and a tool result can
/// carry a secret shown once (`api_key.create`). This filter sits on the writing
/// layer, apart from `RUST_LOG`'s, so no directive, however specific, lets those
/// records through.
fn never_secret(metadata: &Metadata<'_>) -> bool {
    !metadata.target().starts_with("rmcp") || *metadata.level() <= Level::INFO
}

/// The schema this binary is built for: every migration in `migrations/`.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations");

/// Where the database's schema stands against [`MIGRATOR`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    /// Every migration of this binary is applied (newer ones may be too: a
    /// newer binary migrated first, in a rolling deploy).
    Current,
    /// Never migrated.
    Missing,
    /// Some migration of this binary is not applied yet.
    Behind,
}

impl Schema {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "ok",
            Self::Missing => "unmigrated",
            Self::Behind => "behind",
        }
    }
}

/// Reads which migrations the database has applied.
pub async fn schema(pool: &PgPool) -> Result<Schema, sqlx::Error> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(pool).await?;
    if !exists {
        return Ok(Schema::Missing);
    }
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(pool).await?;
    let behind = MIGRATOR.iter().any(|m| m.migration_type.is_up_migration() && !applied.contains(&m.version));
    Ok(if behind { Schema::Behind } else { Schema::Current })
}

/// How long a readiness check waits for PostgreSQL or for Redis: a load
/// balancer should see the truth at once (a restart, a partition), not after
/// a pool's acquire timeout.
pub const READY_TIMEOUT: Duration = Duration::from_millis(250);

/// Where the schema stands, if PostgreSQL answers within [`READY_TIMEOUT`];
/// else why not, in words for the log.
pub async fn check_database(pool: &PgPool) -> Result<Schema, String> {
    match tokio::time::timeout(READY_TIMEOUT, schema(pool)).await {
        Ok(Ok(schema)) => Ok(schema),
        Ok(Err(error)) => Err(crate::error::chain(&error)),
        Err(_) => Err(format!("no answer within {READY_TIMEOUT:?}")),
    }
}

/// Whether Redis answers a `PING` within [`READY_TIMEOUT`] (on a connection of
/// its own); else why not.
pub async fn check_redis(client: &redis::Client) -> Result<(), String> {
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.map(|_| ())
    };
    match tokio::time::timeout(READY_TIMEOUT, ping).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {READY_TIMEOUT:?}")),
    }
}

/// Bounds on what one statement, and one transaction, may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest statement (`statement_timeout`).
    pub statement: Duration,
    /// Longest wait for a row or advisory lock (`lock_timeout`).
    pub lock: Duration,
    /// Longest pause inside an open transaction
    /// (`idle_in_transaction_session_timeout`): PostgreSQL ends the session of a
    /// frozen process (SIGSTOP, a VM pause) so the locks it holds are freed.
    pub idle_in_transaction: Duration,
}

impl Timeouts {
    /// For the request path: a statement past this is a fault, not a workload.
    pub const SERVING: Timeouts = Timeouts {
        statement: Duration::from_secs(30),
        lock: Duration::from_secs(5),
        idle_in_transaction: Duration::from_secs(30),
    };

    /// The same with a shorter pause inside a transaction.
    pub fn idle_in_transaction(self, idle: Duration) -> Self {
        Self { idle_in_transaction: idle, ..self }
    }
}

/// A pooled connection idle this long is checked (one round trip) before it is
/// handed out: PostgreSQL, a pooler or a proxy may have closed it meanwhile.
/// A connection in steady use is not (as HikariCP's `aliveBypassWindowMs`).
pub const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The database pool. Connections open on first use, so a process starts (and
/// reports itself unready) while the database is down. Every connection carries
/// `timeouts` and names its process (`application_name`, seen in
/// `pg_stat_activity`), both set in its start-up packet (no extra round trip).
/// A connection found dead is closed, never handed out or kept.
pub fn connect(
    database_url: &str,
    application: &str,
    max_connections: u32,
    timeouts: Timeouts,
) -> Result<PgPool, sqlx::Error> {
    let options = PgConnectOptions::from_str(database_url)?.application_name(application).options([
        ("statement_timeout", format!("{}ms", timeouts.statement.as_millis())),
        ("lock_timeout", format!("{}ms", timeouts.lock.as_millis())),
        ("idle_in_transaction_session_timeout", format!("{}ms", timeouts.idle_in_transaction.as_millis())),
        // PostgreSQL's side of the connection finds a client that went away
        // without a word (a partition, a lost host) within seconds, and ends
        // its session and transaction: keepalive probes after 5 s of silence,
        // every 2 s, 3 of them; data unacknowledged for 10 s ends it too.
        // (sqlx 0.9 sets no keepalive on its own sockets: the client's side is
        // bounded by leases, heartbeats and timeouts instead; see
        // docs/decisions.md, "Partitions".)
        ("tcp_keepalives_idle", "5".to_owned()),
        ("tcp_keepalives_interval", "2".to_owned()),
        ("tcp_keepalives_count", "3".to_owned()),
        ("tcp_user_timeout", "10000".to_owned()),
    ]);
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        // A connection in steady use is checked by using it (a failure is
        // retried, see `Session`): a ping per checkout would double the round
        // trips of every request. One that sat idle is checked first.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < CHECK_AFTER_IDLE {
                    return Ok(true);
                }
                match sqlx::Connection::ping(conn).await {
                    Ok(()) => Ok(true),
                    Err(error) => {
                        crate::faults::connection_lost();
                        tracing::info!(error = %crate::error::chain(&error), "closed an idle database connection found dead");
                        Ok(false)
                    }
                }
            })
        })
        .connect_lazy_with(options))
}

/// A connection from the pool, its wait boxed: sqlx's acquire future is
/// 8.6 kB in a release build, and every future that awaits it in place
/// reserves that room and is copied whole as it is moved, spawned and
/// polled (a request's, a worker job's). Boxed, the room is a pointer, for
/// one allocation per connection taken.
#[allow(clippy::disallowed_methods, reason = "the one place that awaits it, boxed")]
pub async fn connection(pool: &PgPool) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    Box::pin(pool.acquire()).await
}

/// A pooled connection checked just now (one round trip), for a step retried
/// after its connection was lost: a failover or a terminated session leaves
/// several dead ones in the pool, each closed here as it is found.
pub async fn live_connection(pool: &PgPool) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    let mut last = None;
    for _ in 0..=pool.options().get_max_connections() {
        let mut conn = connection(pool).await?;
        match sqlx::Connection::ping(&mut *conn).await {
            Ok(()) => return Ok(conn),
            Err(error) => {
                crate::faults::connection_lost();
                conn.close_on_drop();
                last = Some(error);
            }
        }
    }
    Err(last.unwrap_or(sqlx::Error::PoolTimedOut))
}

/// A pool for one-off work without the serving timeouts (migrations, operator
/// commands).
pub fn connect_unbounded(database_url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new().max_connections(max_connections).connect_lazy(database_url)
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

/// The size of the future an async function returns, by its arity: what a
/// caller awaiting it reserves and copies as it moves.
#[cfg(test)]
pub(crate) mod sizes {
    pub fn future_of_1<A, F: Future>(_: impl FnOnce(A) -> F) -> usize {
        size_of::<F>()
    }

    pub fn future_of_2<A, B, F: Future>(_: impl FnOnce(A, B) -> F) -> usize {
        size_of::<F>()
    }

    pub fn future_of_3<A, B, C, F: Future>(_: impl FnOnce(A, B, C) -> F) -> usize {
        size_of::<F>()
    }

    pub fn future_of_4<A, B, C, D, F: Future>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
        size_of::<F>()
    }

    pub fn future_of_5<A, B, C, D, E, F: Future>(_: impl FnOnce(A, B, C, D, E) -> F) -> usize {
        size_of::<F>()
    }
}

#[cfg(test)]
mod tests {
    use super::sizes::future_of_1;
    use super::*;

    /// What waits for a pooled connection through [`connection`] holds a
    /// pointer to sqlx's acquire future, not the future itself.
    #[test]
    #[allow(clippy::disallowed_methods, reason = "its size, not a call")]
    fn a_connections_wait_is_boxed() {
        let boxed = future_of_1(connection);
        let acquire = future_of_1(PgPool::acquire);
        assert!(boxed <= 64 && boxed < acquire, "connection: {boxed} bytes, acquire {acquire}");
    }
}
