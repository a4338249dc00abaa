//! What a worker does with each job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, Data};
use backon::{ExponentialBuilder, Retryable};
use sqlx::PgPool;
use svc_core::error::chain;
use svc_core::jobs::{Job, Queue};
use svc_core::knowledge::{self, Outcome, Processing};
use svc_core::reconcile;

use crate::metrics::{JobOutcome, Metrics};

/// What every job shares.
pub struct Context {
    pub pool: PgPool,
    pub queue: Arc<Queue>,
    pub processing: Processing,
    pub metrics: Arc<Metrics>,
}

/// Tries within one job before giving the work back: the work is in
/// PostgreSQL, and the sweeper sends its job again once nobody holds it.
fn retries() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(3))
        .with_max_times(4)
}

/// Runs one job. A transient failure before the work was taken (the database
/// unreachable, a lock held by another) is retried with exponential backoff;
/// once taken, processing retries its own steps (see `knowledge::process`), and
/// only attempts cut short by the content or by a crash count towards the
/// limit in PostgreSQL. The job itself is always acknowledged: apalis's own
/// retries are unbounded in practice, and PostgreSQL, not Redis, decides what
/// is left to do.
pub async fn handle(job: Job, context: Data<Arc<Context>>) -> Result<(), BoxDynError> {
    let started = Instant::now();
    let result = (|| run(&context, job))
        .retry(retries())
        .when(|error| error.fault().is_transient())
        .notify(|error, delay| {
            svc_core::faults::retried(svc_core::faults::Retry::Work);
            tracing::warn!(?job, error = %chain(error), ?delay, "job failed; retrying");
        })
        .await;
    let outcome = match result {
        Ok(Outcome::Promoted) => JobOutcome::Processed,
        Ok(Outcome::Failed(code)) => {
            tracing::info!(?job, code, "revision failed");
            JobOutcome::Failed
        }
        Ok(Outcome::Skipped) => JobOutcome::Skipped,
        Err(error) => {
            tracing::error!(?job, error = %chain(&error), "job given up; the sweeper will send it again");
            JobOutcome::Retried
        }
    };
    context.metrics.job(outcome, started.elapsed());
    Ok(())
}

/// Entries a reconcile job applies before it takes its turn again at the back
/// of the queue.
const APPLY_ENTRIES_PER_JOB: usize = 16;

async fn run(context: &Context, job: Job) -> Result<Outcome, svc_core::error::Error> {
    match job {
        // The job wakes this worker; the revision it names may wait its turn
        // behind another Workspace's (`process_next`).
        Job::ProcessRevision { .. } => knowledge::process_next(&context.pool, &context.processing).await,
        Job::ApplyReconcile { run } => {
            Ok(match reconcile::apply(&context.pool, run, Some(&context.queue), APPLY_ENTRIES_PER_JOB).await? {
                reconcile::Applied::Done => Outcome::Promoted,
                reconcile::Applied::Nothing => Outcome::Skipped,
                reconcile::Applied::More => {
                    if let Err(error) = context.queue.push_all(&[job]).await {
                        tracing::warn!(%error, %run, "could not send a reconcile job again; the sweeper will");
                    }
                    Outcome::Promoted
                }
            })
        }
    }
}
