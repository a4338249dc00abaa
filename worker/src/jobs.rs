//! What a worker does with each job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, Data};
use backon::{ExponentialBuilder, Retryable};
use sqlx::PgPool;
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

/// Runs one job. Transient failures (the database unreachable, a deadlock) are
/// retried with exponential backoff; every attempt at a revision is counted in
/// PostgreSQL, so one that keeps failing ends `failed` there. The job itself is
/// always acknowledged: apalis's own retries are unbounded in practice, and
/// PostgreSQL, not Redis, decides what is left to do.
pub async fn handle(job: Job, context: Data<Arc<Context>>) -> Result<(), BoxDynError> {
    let started = Instant::now();
    let result = (|| run(&context, job))
        .retry(retries())
        .notify(|error, delay| tracing::warn!(?job, %error, ?delay, "job failed; retrying"))
        .await;
    let outcome = match result {
        Ok(Outcome::Promoted) => JobOutcome::Processed,
        Ok(Outcome::Failed(code)) => {
            tracing::info!(?job, code, "revision failed");
            JobOutcome::Failed
        }
        Ok(Outcome::Skipped) => JobOutcome::Skipped,
        Err(error) => {
            tracing::error!(?job, %error, "job given up after retries; the sweeper will send it again");
            JobOutcome::Retried
        }
    };
    context.metrics.job(outcome, started.elapsed());
    Ok(())
}

async fn run(context: &Context, job: Job) -> Result<Outcome, svc_core::error::Error> {
    match job {
        Job::ProcessRevision { revision } => knowledge::process(&context.pool, revision, &context.processing).await,
        Job::ApplyReconcile { run } => Ok(match reconcile::apply(&context.pool, run, Some(&context.queue)).await? {
            reconcile::Applied::Done => Outcome::Promoted,
            reconcile::Applied::Nothing => Outcome::Skipped,
        }),
    }
}
