//! What a worker does with each job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, Data};
use sqlx::PgPool;
use svc_core::error::chain;
use svc_core::jobs::{Job, Queue};
use svc_core::knowledge::{self, OnSettled, Outcome, Processing, Settled};
use svc_core::reconcile;
use tokio_util::sync::CancellationToken;

use crate::metrics::{JobOutcome, Metrics};

/// What every job shares.
pub struct Context {
    pub pool: PgPool,
    pub queue: Arc<Queue>,
    pub processing: Processing,
    pub metrics: Arc<Metrics>,
    /// Cancelled when the worker starts stopping: a wake-up hands its slot
    /// back after the revision it is on.
    pub stopping: CancellationToken,
}

/// Revisions one wake-up processes before it hands its job slot back: it then
/// wakes another at the back of the queue, so that other jobs (reconcile
/// runs) take their turn in a long backlog, and a stopping worker lets go
/// within one revision.
pub const REVISIONS_PER_WAKE_UP: usize = 32;

/// How long a wake-up that met an error it could not get past waits before
/// it wakes another.
const PAUSE_AFTER_AN_ERROR: Duration = Duration::from_secs(2);

/// Runs one job. A failure worth waiting for (the database unreachable, a
/// lock held by another: `svc_core::retry`) is tried again with exponential
/// backoff; once taken, processing retries its own steps by the same rule
/// (see `knowledge::process`), and only attempts cut short by the content
/// (a statement timeout) or by a crash count towards the limit in PostgreSQL. The job itself is always acknowledged: apalis's own
/// retries are unbounded in practice, and PostgreSQL, not Redis, decides what
/// is left to do.
pub async fn handle(job: Job, context: Data<Arc<Context>>) -> Result<(), BoxDynError> {
    match job {
        Job::ProcessRevision { .. } => wake_up(&context, job).await,
        Job::ApplyReconcile { run } => {
            let started = Instant::now();
            let result = svc_core::retry::work(job, || apply(&context, run)).await;
            context.metrics.job(ended(job, result), started.elapsed());
        }
    }
    Ok(())
}

/// A wake-up: processes the revisions next in turn, one after another (each
/// counted in the metrics as a job), until none is left that nobody holds,
/// then ends; after [`REVISIONS_PER_WAKE_UP`], once the worker is stopping,
/// or on an error it could not get past (the revision's attempt counted, or
/// the database gone past the retries; after a pause), it wakes another
/// instead. Producers send a wake-up only while few wait (`Queue::send`), so
/// this is what processes a backlog.
async fn wake_up(context: &Context, job: Job) {
    let mut taken = 0;
    loop {
        let started = Instant::now();
        let result = svc_core::retry::work(job, || knowledge::take_next(&context.pool, &context.processing)).await;
        // `None`: nothing is left that nobody holds.
        let Some(outcome) = result.transpose() else {
            if taken == 0 {
                context.metrics.job(JobOutcome::Skipped, started.elapsed());
            }
            return;
        };
        let given_up = outcome.is_err();
        context.metrics.job(ended(job, outcome), started.elapsed());
        taken += 1;
        if given_up && !context.stopping.is_cancelled() {
            // An error before any attempt was counted (choosing, or failing
            // an overdue revision) recurs at once: at most one more wake-up
            // a pause from this slot, not one a poll.
            tokio::time::sleep(PAUSE_AFTER_AN_ERROR).await;
        }
        if given_up || taken >= REVISIONS_PER_WAKE_UP || context.stopping.is_cancelled() {
            if let Err(error) = context.queue.push_all(&[job]).await {
                tracing::warn!(%error, "could not wake another worker; the sweeper will");
            }
            return;
        }
    }
}

/// Where attempts cut short are counted once settled: a promotion that
/// committed as processed, an attempt handed back as retried.
pub fn settled_into(metrics: Arc<Metrics>) -> OnSettled {
    OnSettled::new(move |settled| match settled {
        Settled::Promoted => metrics.counted(JobOutcome::Processed),
        Settled::HandedBack => metrics.counted(JobOutcome::Retried),
        Settled::Nothing => {}
    })
}

/// The metrics' outcome of a job (or of one revision of a wake-up), logged.
fn ended(job: Job, result: Result<Outcome, svc_core::error::Error>) -> JobOutcome {
    match result {
        Ok(Outcome::Promoted) => JobOutcome::Processed,
        Ok(Outcome::Failed(code)) => {
            tracing::info!(?job, code, "revision failed");
            JobOutcome::Failed
        }
        Ok(Outcome::Skipped) => JobOutcome::Skipped,
        Err(error) => {
            tracing::error!(?job, error = %chain(&error), "job given up");
            JobOutcome::Retried
        }
    }
}

/// Entries a reconcile job applies before it takes its turn again at the back
/// of the queue.
const APPLY_ENTRIES_PER_JOB: usize = 16;

async fn apply(context: &Context, run: svc_core::ids::RunId) -> Result<Outcome, svc_core::error::Error> {
    let job = Job::ApplyReconcile { run };
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
