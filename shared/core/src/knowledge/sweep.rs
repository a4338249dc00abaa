//! The sweeper: nothing accepted is lost or stuck.
//!
//! Jobs live in Redis and can be lost (Redis flushed, an enqueue that failed
//! after its commit) or held by a worker that died. PostgreSQL knows what is
//! unfinished, so the sweeper, run by every worker but by one at a time across
//! them, makes sure the queue holds a job for every unfinished revision that
//! nobody holds, up to `jobs::WAKE_UPS_WAITING` (a job wakes a worker, which
//! takes whichever revision is next in turn, then the next, until none is
//! left: only the shortfall is sent, for revisions whose last job is older
//! than `requeue_after`), re-sends a job for every reconcile run that made no
//! progress for as long, and fails every revision past the
//! processing deadline (`processing_timeout`). It also drops the records
//! Redis keeps of finished jobs once they are `keep_finished` old.
//!
//! One at a time is a lease in a row (`store::leases`), renewed while the
//! sweep runs: a sweeper cut off from PostgreSQL, even with its sessions
//! still open on PostgreSQL's side, loses it within [`LEASE`], and the next
//! replica sweeps. Every step is safe beside another sweep anyway (failing,
//! requeueing and merging each check what they change); the lease only saves
//! the work twice.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::{error_code, process};
use crate::embeddings::Embeddings;
use crate::error::Result;
use crate::jobs::{Job, Queue};
use crate::lease::Renewal;
use crate::store;

/// How long the sweeper's lease lasts without renewal.
pub const LEASE: Duration = Duration::from_secs(10);

/// The sweeper's lease's name.
const NAME: &str = "sweeper";

/// How the sweeper works.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Who sweeps: unique per process.
    pub holder: String,
    /// Age of an unfinished revision's last job at which it may be sent again
    /// (when the queue holds fewer jobs than revisions nobody holds).
    pub requeue_after: Duration,
    /// Age at which an unfinished revision fails `processing_timeout`.
    pub deadline: Duration,
    /// How long Redis keeps a finished job's record (for inspection) before
    /// the sweep drops it.
    pub keep_finished: Duration,
    /// The workers' model: Agents that answer with another (or whose
    /// documents lack its vectors) are embedded anew with it, a few per sweep.
    pub embeddings: Option<Arc<Embeddings>>,
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Whether this process swept (another was sweeping otherwise).
    pub ran: bool,
    pub timed_out: usize,
    pub requeued: usize,
    pub purged: u64,
    /// Finished jobs whose records were dropped from Redis.
    pub vacuumed: u64,
    /// Agents embedded anew with the workers' model.
    pub embedded: usize,
}

/// Revisions handled per statement.
const BATCH: i64 = 500;

/// Agents embedded anew per sweep (each a few seconds at 100,000 passages
/// with the static model): a change of model goes through the Agents in the
/// background while the sweep's other work keeps its pace.
const EMBEDDED_PER_SWEEP: i64 = 2;

/// Sweeps once, unless another process is sweeping.
pub async fn sweep(pool: &PgPool, queue: Option<&Queue>, settings: &Sweep) -> Result<Swept> {
    let secs = LEASE.as_secs_f64();
    let taken = {
        let mut conn = crate::runtime::connection(pool).await?;
        store::leases::take(&mut conn, NAME, &settings.holder, secs).await?
    };
    if !taken {
        return Ok(Swept::default());
    }
    let renewing = pool.clone();
    let holder = settings.holder.clone();
    let renewal = Renewal::keep(
        format!("{NAME} {holder}"),
        LEASE,
        Arc::new(move || {
            let (pool, holder) = (renewing.clone(), holder.clone());
            Box::pin(async move {
                let mut conn = crate::runtime::connection(&pool).await?;
                Ok(store::leases::renew(&mut conn, NAME, &holder, secs).await?)
            })
        }),
    );
    let result = tokio::select! {
        result = sweep_held(pool, queue, settings) => result,
        // Another replica sweeps now: this sweep stops where it is.
        () = renewal.lost() => Ok(Swept { ran: true, ..Swept::default() }),
    };
    renewal.stop().await;
    let released = match crate::runtime::connection(pool).await {
        Ok(mut conn) => store::leases::release(&mut conn, NAME, &settings.holder).await.map_err(Into::into),
        Err(error) => Err(crate::error::Error::from(error)),
    };
    if let Err(error) = released {
        tracing::warn!(error = %crate::error::chain(&error), "could not give the sweeper's lease up; it runs out by itself");
    }
    result
}

async fn sweep_held(pool: &PgPool, queue: Option<&Queue>, settings: &Sweep) -> Result<Swept> {
    let mut swept = Swept { ran: true, ..Swept::default() };
    let mut conn = crate::runtime::connection(pool).await?;
    let overdue = store::knowledge::overdue(&mut conn, settings.deadline.as_secs_f64(), BATCH).await?;
    drop(conn);
    for revision in overdue {
        if process::fail(pool, revision, error_code::PROCESSING_TIMEOUT).await? != super::Outcome::Skipped {
            swept.timed_out += 1;
        }
    }
    if let Some(queue) = queue {
        // Jobs are wake-ups (see `process_next`): what matters is that the
        // queue holds one for each revision nobody holds, whichever it names,
        // up to as many as producers keep waiting (`Queue::send`).
        let queued =
            queue.wake_ups_waiting().await.map_err(|e| crate::error::Error::internal(format!("queue depth: {e}")))?;
        let queued = i64::try_from(queued).unwrap_or(i64::MAX);
        let mut conn = crate::runtime::connection(pool).await?;
        let after = settings.requeue_after.as_secs_f64();
        let wanted = i64::try_from(crate::jobs::WAKE_UPS_WAITING).unwrap_or(i64::MAX);
        let stale = store::knowledge::take_unawakened(&mut conn, after, queued, wanted, BATCH).await?;
        let runs = store::reconcile::take_stale(&mut conn, after, BATCH).await?;
        let jobs: Vec<Job> = stale
            .into_iter()
            .map(|revision| Job::ProcessRevision { revision })
            .chain(runs.into_iter().map(|run| Job::ApplyReconcile { run }))
            .collect();
        drop(conn);
        if !jobs.is_empty() {
            queue.push_all(&jobs).await.map_err(|e| crate::error::Error::internal(format!("requeue: {e}")))?;
            swept.requeued = jobs.len();
        }
    }
    // Agents whose index a promotion left unmerged (another merge of it ran
    // then), or masked by deletes.
    svc_search::maintain_due(pool, 16).await?;
    if let Some(embeddings) = &settings.embeddings {
        swept.embedded = svc_search::embed_due(pool, &**embeddings, EMBEDDED_PER_SWEEP).await?;
    }
    swept.purged = crate::housekeeping::purge_idempotency_records(pool).await?;
    if let Some(queue) = queue {
        // Housekeeping only: the work above is done whatever becomes of it.
        match queue.vacuum(settings.keep_finished).await {
            Ok(vacuumed) => swept.vacuumed = vacuumed,
            Err(error) => tracing::warn!(%error, "could not drop finished jobs from Redis"),
        }
    }
    Ok(swept)
}
