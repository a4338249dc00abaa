//! `svc-worker`: processes Knowledge Sources (and reconcile runs) from the
//! Redis queue, and sweeps what was lost or stuck. Any number can run.
//!
//! It runs until SIGTERM or SIGINT, then stops taking jobs and lets those in
//! flight finish within the grace period.

mod config;
mod health;
mod jobs;
mod metrics;
mod poll;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{BackendExt, Monitor, WorkerBuilder, WorkerBuilderExt};
use apalis_redis::RedisStorage;
use clap::Parser;
use svc_core::jobs::{Job, Queue, apalis_config};
use svc_core::knowledge::statistics::{self, Upkeep};
use svc_core::knowledge::{Processing, Sweep};
use svc_core::runtime;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::health::Readiness;
use crate::metrics::Metrics;
use crate::poll::EveryInterval;

#[tokio::main]
async fn main() -> ExitCode {
    runtime::init_logging();
    let config = Config::parse();
    match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{}", svc_core::error::chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// A name no other worker process (or restart of this one) has.
fn worker_name(restarts: usize) -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_else(|_| "host".into());
    format!("{}-{}-{restarts}", host.trim(), std::process::id())
}

async fn run(config: Config) -> anyhow::Result<()> {
    // The model first: a worker without it would promote revisions that
    // cannot answer by meaning.
    let embeddings = config.embeddings.load().map_err(anyhow::Error::msg)?;
    // A connection per job slot, plus the sweeper, the lease renewals and checks.
    let connections = u32::try_from(config.concurrency * 2 + 4).unwrap_or(32);
    // A frozen replica's open transaction ends well within its lease, so the
    // replica that takes its work over is not kept waiting on its locks.
    let lease = Config::secs(config.lease_secs);
    let timeouts = runtime::Timeouts::SERVING.idle_in_transaction((lease / 2).max(Duration::from_secs(1)));
    let pool = runtime::connect(config.database_url(), "svc-worker", connections, timeouts)?;
    let queue = Queue::new(config.redis_url(), &config.queue_namespace)?;
    let redis = svc_core::jobs::redis_client(config.redis_url())?;
    let stop = CancellationToken::new();
    let metrics = Arc::new(Metrics::default());
    let readiness = Arc::new(Readiness::default());

    let (addr, server) = health::serve(config.metrics_bind, readiness.clone(), metrics.clone(), stop.clone()).await?;
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(server);
    tasks.spawn(health::watch(pool.clone(), redis, readiness, stop.clone()));
    let sweep = Sweep {
        holder: format!("{}/sweeper", worker_name(0)),
        requeue_after: Config::secs(config.requeue_after_secs),
        deadline: Config::secs(config.processing_deadline_secs),
        keep_finished: Config::secs(config.keep_finished_jobs_secs),
        embeddings: embeddings.clone(),
    };
    let queue = Arc::new(queue);
    tasks.spawn(sweeper(
        pool.clone(),
        queue.clone(),
        sweep,
        Config::secs(config.sweep_interval_secs),
        metrics.clone(),
        stop.clone(),
    ));
    for (upkeep, every) in
        [(Upkeep::Analyze, config.analyze_interval_secs), (Upkeep::Vacuum, config.vacuum_interval_secs)]
    {
        if every > 0 {
            tasks.spawn(look_after(pool.clone(), upkeep, Config::secs(every), stop.clone()));
        }
    }

    let stopping = CancellationToken::new();
    let context = Arc::new(jobs::Context {
        pool,
        queue: queue.clone(),
        processing: Processing {
            worker: worker_name(0),
            lease: Config::secs(config.lease_secs),
            max_attempts: config.max_attempts.max(1),
            deadline: Config::secs(config.processing_deadline_secs),
            choosing: Default::default(),
            on_settled: jobs::settled_into(metrics.clone()),
            embeddings,
        },
        metrics,
        stopping: stopping.clone(),
    });
    // Wait for Redis before the first worker (retrying in the background).
    let connection = loop {
        tokio::select! {
            connected = queue.connection() => match connected {
                Ok(connection) => break connection,
                Err(error) => {
                    tracing::warn!(%error, "waiting for Redis");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            },
            () = runtime::shutdown_signal() => {
                stop.cancel();
                tasks.join_all().await;
                return Ok(());
            }
        }
    };
    let (concurrency, poll) = (config.concurrency.max(1), Duration::from_millis(config.poll_ms.max(10)));
    let namespace = config.queue_namespace.clone();
    let build = move |restarts: usize| {
        // Jobs are claimed in batches before they run: no more than can run.
        let storage = RedisStorage::<Job>::new(connection.clone())
            .with_config(apalis_config(&namespace).batch_size(concurrency))
            .poll_with_strategy(EveryInterval::new(poll));
        WorkerBuilder::new(worker_name(restarts))
            .backend(storage)
            .data(context.clone())
            .catch_panic()
            .concurrency(concurrency)
            .build(jobs::handle)
    };
    tracing::info!(metrics = %addr, concurrency, namespace = %config.queue_namespace, "svc-worker started");
    let grace = Config::secs(config.shutdown_grace_secs);
    let monitored = Monitor::new()
        .register(build)
        // Any Redis error ends a worker (a lost connection, a slow answer): start
        // it again, under a new name, as often as it takes.
        .should_restart(|_, error| {
            tracing::warn!(%error, "a worker stopped; starting it again");
            true
        })
        .shutdown_timeout(grace)
        .run_with_signal(async {
            runtime::shutdown_signal().await;
            stopping.cancel();
            tracing::info!("svc-worker stopping: finishing jobs in flight");
            Ok(())
        })
        .await;
    stop.cancel();
    tasks.join_all().await;
    monitored?;
    tracing::info!("svc-worker stopped");
    Ok(())
}

/// Keeps the knowledge tables' statistics fresh and their dead rows in check
/// (see `svc_core::knowledge::statistics`): looks every few seconds (every
/// `interval` for vacuums), and runs `upkeep` where it is due unless a
/// replica did within `interval`. A stop ends a run midway: PostgreSQL
/// finishes its statement alone, and the next replica's skips the table until
/// it is done.
async fn look_after(pool: sqlx::PgPool, upkeep: Upkeep, interval: Duration, stop: CancellationToken) {
    let look = match upkeep {
        Upkeep::Analyze => statistics::LOOK_EVERY.min(interval),
        Upkeep::Vacuum => interval,
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(look) => {}
        }
        let started = std::time::Instant::now();
        let ran = tokio::select! {
            () = stop.cancelled() => return,
            // A connection cut off without an error must not stop the looks.
            () = tokio::time::sleep(statistics::RUN_LIMIT) => {
                tracing::warn!(?upkeep, "no answer from PostgreSQL; trying next interval");
                continue;
            }
            ran = statistics::look_after(&pool, upkeep, interval) => ran,
        };
        match ran {
            // Analyzes are rare and worth a line; vacuums run every few seconds.
            Ok(tables) if !tables.is_empty() && upkeep == Upkeep::Analyze => {
                tracing::info!(?tables, seconds = started.elapsed().as_secs_f64(), "analyzed knowledge tables")
            }
            Ok(tables) if !tables.is_empty() => {
                tracing::debug!(?tables, seconds = started.elapsed().as_secs_f64(), "vacuumed knowledge tables")
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(?upkeep, error = %svc_core::error::chain(&error), "could not look after the knowledge tables; trying next interval")
            }
        }
    }
}

/// Sweeps now and every `interval` until `stop`. A stop ends a sweep in
/// progress where it is (cut off from PostgreSQL, it might never end): every
/// step is safe to leave half done, and its lease runs out.
async fn sweeper(
    pool: sqlx::PgPool,
    queue: Arc<Queue>,
    settings: Sweep,
    interval: Duration,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    loop {
        let swept = tokio::select! {
            () = stop.cancelled() => return,
            swept = svc_core::knowledge::sweep(&pool, Some(&queue), &settings) => swept,
        };
        match swept {
            Ok(swept) => {
                metrics.swept(swept.requeued, swept.timed_out);
                if swept.requeued + swept.timed_out > 0 || swept.purged + swept.vacuumed > 0 {
                    tracing::info!(
                        requeued = swept.requeued,
                        timed_out = swept.timed_out,
                        purged_idempotency_records = swept.purged,
                        vacuumed_jobs = swept.vacuumed,
                        "swept"
                    );
                }
            }
            Err(error) => {
                tracing::warn!(error = %svc_core::error::chain(&error), "sweep failed; retrying next interval")
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
