//! The worker's configuration: read once from flags or the environment
//! (`svc-worker --help` lists every setting with its variable and default).

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

#[derive(Clone, Debug, clap::Parser)]
#[command(name = "svc-worker", version, about = "The svc worker: processes Knowledge Sources and reconcile runs.")]
pub struct Config {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://localhost/svc", hide_env_values = true)]
    pub database_url: SecretString,
    /// Redis URL of the job queue (database index honoured).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379", hide_env_values = true)]
    pub redis_url: SecretString,
    /// Prefix of every queue key: deployments (or test runs) sharing a Redis use different ones.
    #[arg(long, env = "SVC_QUEUE_NAMESPACE", default_value = "svc")]
    pub queue_namespace: String,
    /// Jobs this process runs at once.
    #[arg(long, env = "SVC_WORKER_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    /// Seconds after import at which an unfinished revision fails `processing_timeout`.
    #[arg(long, env = "SVC_PROCESSING_DEADLINE_SECS", default_value_t = 900)]
    pub processing_deadline_secs: u64,
    /// Address of `/healthz`, `/readyz` and `/metrics` (`:0` picks a free port).
    #[arg(long, env = "SVC_WORKER_METRICS_BIND", default_value = "127.0.0.1:9091")]
    pub metrics_bind: SocketAddr,
    /// Seconds between sweeps (re-sending lost jobs, failing overdue ones).
    #[arg(long, env = "SVC_SWEEP_INTERVAL_SECS", default_value_t = 5)]
    pub sweep_interval_secs: u64,
    /// Seconds after which a job for unfinished work nobody holds is sent again.
    #[arg(long, env = "SVC_REQUEUE_AFTER_SECS", default_value_t = 15)]
    pub requeue_after_secs: u64,
    /// Seconds Redis keeps a finished job's record before the sweep drops it.
    #[arg(long, env = "SVC_KEEP_FINISHED_JOBS_SECS", default_value_t = 3600)]
    pub keep_finished_jobs_secs: u64,
    /// Seconds an attempt holds its revision without renewing (renewed every third).
    #[arg(long, env = "SVC_LEASE_SECS", default_value_t = 10)]
    pub lease_secs: u64,
    /// Attempts before a revision fails `internal`.
    #[arg(long, env = "SVC_MAX_ATTEMPTS", default_value_t = 5)]
    pub max_attempts: i32,
    /// Milliseconds between looks at the queue when idle.
    #[arg(long, env = "SVC_WORKER_POLL_MS", default_value_t = 100)]
    pub poll_ms: u64,
    /// Seconds between looks at the knowledge tables' statistics, shared by all
    /// replicas: tables that changed a lot since their last analyze are
    /// analyzed (0: never; leave it to autovacuum).
    #[arg(long, env = "SVC_ANALYZE_INTERVAL_SECS", default_value_t = 60)]
    pub analyze_interval_secs: u64,
    /// Seconds between vacuums of the knowledge tables, shared by all
    /// replicas: a table is vacuumed once a fiftieth of its rows died (at
    /// least 1,000, at most 10,000), so
    /// claims and answers do not slow down as promotions and merges leave dead
    /// rows behind (0: never; leave it to autovacuum).
    #[arg(long, env = "SVC_VACUUM_INTERVAL_SECS", default_value_t = 10)]
    pub vacuum_interval_secs: u64,
    /// Seconds in-flight jobs get to finish after SIGTERM.
    #[arg(long, env = "SVC_WORKER_SHUTDOWN_GRACE_SECS", default_value_t = 30)]
    pub shutdown_grace_secs: u64,

    #[command(flatten)]
    pub embeddings: svc_core::embeddings::EmbeddingsArgs,
}

impl Config {
    pub fn database_url(&self) -> &str {
        self.database_url.expose_secret()
    }

    pub fn redis_url(&self) -> &str {
        self.redis_url.expose_secret()
    }

    pub fn secs(value: u64) -> Duration {
        Duration::from_secs(value.max(1))
    }
}
