//! Processing revisions: what a worker does with a `ProcessRevision` job.
//!
//! A job only wakes a worker: the worker takes whichever revision is next in
//! turn across Workspaces ([`take_next`], [`process_next`]), then the next,
//! so one Workspace's backlog does not queue another's source behind it
//! (docs/decisions.md, "Which revision a worker takes next" and "Wake-ups
//! process a backlog").
//!
//! Safe to run twice, late, or beside another worker on the same revision:
//! - an attempt starts only on a revision still unfinished and not leased by a
//!   live worker, and counts itself in PostgreSQL: past `max_attempts` (a
//!   revision that keeps crashing its worker) the revision fails `internal`;
//! - the lease is renewed while the attempt runs, so a worker that dies (or
//!   freezes) loses it within `lease`, and another attempt can start;
//! - passages and the promotion commit together, and only if this worker still
//!   holds the lease and the revision is still the source's candidate: a newer
//!   candidate always wins, and nothing is promoted twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use backon::Retryable;

use sqlx::{Connection, PgPool};
use tokio::sync::Notify;

use super::{error_code, passages};
use crate::entitlements::LimitKey;
use crate::error::{Error, Result};
use crate::ids::RevisionId;
use crate::store::knowledge::{Claimed, Material, MergeBacklog, Passages, Processed, Promoted, Refusal};
use crate::store::usage::Delta;
use crate::store::{self};

/// How a worker processes revisions.
#[derive(Clone, Debug)]
pub struct Processing {
    /// This worker's name (unique per process).
    pub worker: String,
    /// How long an attempt holds its revision without renewing.
    pub lease: Duration,
    /// Attempts before a revision fails `internal`.
    pub max_attempts: i32,
    /// Age at which an unfinished revision fails `processing_timeout`.
    pub deadline: Duration,
    /// This process's jobs choosing a revision right now (shared by clones).
    pub choosing: Choosing,
}

/// How many of a process's jobs are choosing a revision at this moment: a
/// job that joined `n` others starts at the turn's `n`-th candidate (fewer
/// if some have left since), so jobs choosing together mostly try different
/// revisions first instead of all trying the first and then the next (about
/// two claims per attempt started with four job slots). A job choosing alone
/// starts at the first, in turn.
#[derive(Clone, Debug, Default)]
pub struct Choosing(Arc<AtomicUsize>);

impl Choosing {
    /// Counts a job in until the returned place is dropped.
    pub fn join(&self) -> Chooser<'_> {
        let others = self.0.fetch_add(1, Ordering::Relaxed);
        Chooser { choosing: self, others }
    }
}

/// One job's place among those choosing; leaves when dropped.
pub struct Chooser<'a> {
    choosing: &'a Choosing,
    others: usize,
}

impl Chooser<'_> {
    /// Where this job starts among the candidates: the others it joined,
    /// but no more than the others still choosing.
    fn place(&self) -> usize {
        self.others.min(self.choosing.0.load(Ordering::Relaxed).saturating_sub(1))
    }
}

impl Drop for Chooser<'_> {
    fn drop(&mut self) {
        self.choosing.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Processing {
    /// A name for one attempt, unique in this process: its lease is its own, so
    /// ending one attempt never touches a sibling job slot's lease.
    pub fn attempt_name(&self) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        format!("{}/{}", self.worker, NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// What one job did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The revision became active.
    Promoted,
    /// The revision failed with this error code.
    Failed(&'static str),
    /// Nothing to do: the revision is finished, another worker holds it, or a
    /// newer candidate took its place.
    Skipped,
}

/// Revisions read per look at the turn order: more than one, so that workers
/// starting at once spread over the first Workspaces in turn.
const CANDIDATES: i64 = 4;

/// Looks at the turn order at most this often per job. Each look that finds
/// only revisions other attempts took meanwhile means those attempts started,
/// so the loop ends well before; the bound only guards against the unforeseen.
const MAX_LOOKS: usize = 64;

/// Processes a revision next in turn once (see the module documentation):
/// the Workspace with the fewest attempts running, then the one served longest
/// ago, and within it the oldest revision nobody holds; a job choosing beside
/// others of its process starts further down that order ([`Choosing`]).
/// `Skipped` when nothing is left that nobody holds.
pub async fn process_next(pool: &PgPool, processing: &Processing) -> Result<Outcome> {
    Ok(take_next(pool, processing).await?.unwrap_or(Outcome::Skipped))
}

/// As [`process_next`], but `None` when nothing is left that nobody holds,
/// told apart from a revision that was taken and then skipped (superseded, or
/// its lease lost): a worker processing revisions one after another stops at
/// `None` only.
pub async fn take_next(pool: &PgPool, processing: &Processing) -> Result<Option<Outcome>> {
    Ok(Some(match choose(pool, processing).await? {
        None => return Ok(None),
        Some(Chosen::Fail(revision, code)) => fail(pool, revision, code).await?,
        Some(Chosen::Attempt(revision, owner, material)) => run(pool, revision, processing, owner, material).await?,
    }))
}

/// What [`choose`] found next in turn.
enum Chosen {
    /// An attempt named `owner` started on the revision.
    Attempt(RevisionId, String, Material),
    /// The revision must fail with this error code.
    Fail(RevisionId, &'static str),
}

/// The revision next in turn, once an attempt started on it or it must fail;
/// `None` when nothing is left that nobody holds. The job leaves the others
/// choosing before it runs the attempt.
async fn choose(pool: &PgPool, processing: &Processing) -> Result<Option<Chosen>> {
    let chooser = processing.choosing.join();
    for _ in 0..MAX_LOOKS {
        let mut candidates = {
            let mut conn = crate::runtime::connection(pool).await?;
            store::knowledge::next_in_turn(&mut conn, CANDIDATES).await?
        };
        if candidates.is_empty() {
            return Ok(None);
        }
        let first = chooser.place() % candidates.len();
        candidates.rotate_left(first);
        let last = candidates.len() - 1;
        for (i, revision) in candidates.into_iter().enumerate() {
            let owner = processing.attempt_name();
            // Another job starting an attempt holds its source: the next
            // candidate rather than a wait, so jobs claiming at the same
            // moment spread over the candidates; the last one is waited for.
            let source = if i < last { Source::SkipIfHeld } else { Source::Wait };
            match begin(pool, revision, processing, &owner, source).await? {
                // Another attempt took it meanwhile: the next in turn.
                Begin::Skip => continue,
                Begin::Fail(code) => return Ok(Some(Chosen::Fail(revision, code))),
                Begin::Attempt(material) => return Ok(Some(Chosen::Attempt(revision, owner, material))),
            }
        }
    }
    tracing::warn!("found only revisions others had taken, {MAX_LOOKS} times over; the sweeper wakes what is left");
    Ok(None)
}

/// Processes `revision` once (see the module documentation). An `Err` is a
/// failure the attempt could not get past: a transient one (the database
/// unreachable past the deadline, the lease lost) gives the attempt back, so it
/// does not count towards `max_attempts`; any other counts.
pub async fn process(pool: &PgPool, revision: RevisionId, processing: &Processing) -> Result<Outcome> {
    let owner = processing.attempt_name();
    match begin(pool, revision, processing, &owner, Source::Wait).await? {
        Begin::Skip => Ok(Outcome::Skipped),
        Begin::Fail(code) => fail(pool, revision, code).await,
        Begin::Attempt(material) => run(pool, revision, processing, owner, material).await,
    }
}

/// Runs the attempt `owner` started on `revision`, under its lease, on the
/// `material` its claim read.
async fn run(
    pool: &PgPool,
    revision: RevisionId,
    processing: &Processing,
    owner: String,
    material: Material,
) -> Result<Outcome> {
    let lease = Lease::keep(pool.clone(), revision, owner.clone(), processing.lease);
    let result = attempt_until_done(pool, revision, processing, &owner, &lease, material).await;
    lease.stop().await;
    if let Err(error) = &result {
        // Give the lease up at once so the next job need not wait it out; a
        // transient failure gives the attempt back too.
        let transient = crate::error::worth_waiting_for(error);
        let released = match crate::runtime::connection(pool).await {
            Ok(mut conn) => store::knowledge::release_lease(&mut conn, revision, &owner, transient).await,
            Err(error) => Err(error),
        };
        if let Err(error) = released {
            tracing::warn!(%revision, error = %crate::error::chain(&error), "could not release a lease; it runs out by itself");
        }
    }
    result
}

/// Runs the attempt, and again after each transient failure (contention, a
/// lost connection), backing off, while this attempt still holds its lease and
/// until the processing deadline: waiting on another holder's lock is not a
/// failed attempt. The first try uses the claim's `material`; a later one reads
/// it again (the Agent's language may have changed meanwhile).
async fn attempt_until_done(
    pool: &PgPool,
    revision: RevisionId,
    processing: &Processing,
    owner: &str,
    lease: &Lease,
    material: Material,
) -> Result<Outcome> {
    let until = std::time::Instant::now() + processing.deadline;
    let backoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times();
    let mut claimed = Some(material);
    (|| attempt(pool, revision, owner, claimed.take()))
        .retry(backoff)
        .when(|error| crate::error::worth_waiting_for(error) && lease.held() && std::time::Instant::now() < until)
        .notify(|error, delay| {
            crate::faults::retried(crate::faults::Retry::Work);
            tracing::warn!(%revision, error = %crate::error::chain(error), ?delay, "attempt interrupted; trying again");
        })
        .await
}

enum Begin {
    Attempt(Material),
    Skip,
    Fail(&'static str),
}

/// Whether [`begin`] waits for a source another transaction holds.
#[derive(Clone, Copy)]
enum Source {
    Wait,
    SkipIfHeld,
}

/// Starts an attempt named `owner`, or says why not.
async fn begin(
    pool: &PgPool,
    revision: RevisionId,
    processing: &Processing,
    owner: &str,
    source: Source,
) -> Result<Begin> {
    let claim = store::knowledge::Claim {
        owner,
        lease_secs: processing.lease.as_secs_f64(),
        deadline_secs: processing.deadline.as_secs_f64(),
        max_attempts: processing.max_attempts,
        wait: matches!(source, Source::Wait),
    };
    let mut conn = crate::runtime::connection(pool).await?;
    Ok(match store::knowledge::claim(&mut conn, revision, &claim).await? {
        None => Begin::Skip,
        Some(Claimed::Started(material)) => Begin::Attempt(material),
        Some(Claimed::NotStarted(Refusal::Held)) => Begin::Skip,
        Some(Claimed::NotStarted(Refusal::Overdue)) => Begin::Fail(error_code::PROCESSING_TIMEOUT),
        Some(Claimed::NotStarted(Refusal::OutOfAttempts)) => Begin::Fail(error_code::INTERNAL),
    })
}

/// One attempt on a revision held under `owner`'s lease, on `material` if
/// given (else read now).
async fn attempt(pool: &PgPool, revision: RevisionId, owner: &str, material: Option<Material>) -> Result<Outcome> {
    let material = match material {
        Some(material) => material,
        None => {
            let mut conn = crate::runtime::connection(pool).await?;
            store::knowledge::material(&mut conn, revision)
                .await?
                .ok_or_else(|| Error::internal("revision vanished"))?
        }
    };
    let Some(content) = material.content.as_deref() else {
        // Its content was dropped: it was failed or replaced meanwhile.
        return Ok(Outcome::Skipped);
    };
    if svc_contract::digest::sha256_prefixed(content.as_bytes()) != material.digest {
        return fail(pool, revision, error_code::DIGEST_MISMATCH).await;
    }
    let split = passages::split(content);
    let title_words = passages::words(&material.title);
    let words = split
        .iter()
        .map(|p| title_words + p.heading.as_deref().map_or(0, passages::words) + passages::words(&p.body))
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .collect();
    let (headings, bodies) = split.into_iter().map(|p| (p.heading, p.body)).unzip();
    match promote(pool, revision, owner, &material, headings, bodies, words).await? {
        Promotion::Done(backlog) => {
            // Housekeeping of the Agent's index, after the commit: the
            // promotion stands whatever becomes of it (the sweep merges what
            // is left).
            if let Err(error) = super::merge::maintain(pool, material.agent_id, Some(backlog)).await {
                tracing::warn!(agent = %material.agent_id, error = %crate::error::chain(&error), "could not merge the index");
            }
            Ok(Outcome::Promoted)
        }
        Promotion::Empty => fail(pool, revision, error_code::EMPTY_CONTENT).await,
        Promotion::Lost => Ok(Outcome::Skipped),
        Promotion::Superseded => fail(pool, revision, error_code::SUPERSEDED).await.map(|_| Outcome::Skipped),
    }
}

enum Promotion {
    /// Promoted, leaving the Agent's index with this merge backlog.
    Done(MergeBacklog),
    /// Nothing indexable.
    Empty,
    /// This worker no longer holds the revision.
    Lost,
    /// The source's candidate is another revision now (or the source is gone).
    Superseded,
}

/// Writes the passages and promotes the revision, all in one transaction. Locks
/// follow the store's order: the source, then revisions, and the Workspace's
/// usage row last, only when a replaced revision frees bytes: a first revision
/// leaves usage alone (its bytes were counted when it was added), so
/// promotions never hold up the Workspace's adds.
async fn promote(
    pool: &PgPool,
    revision: RevisionId,
    owner: &str,
    material: &Material,
    headings: Vec<Option<String>>,
    bodies: Vec<String>,
    words: Vec<i32>,
) -> Result<Promotion> {
    let mut conn = crate::runtime::connection(pool).await?;
    let mut tx = conn.begin().await?;
    let passages = Passages {
        revision,
        source: material.source_id,
        agent: material.agent_id,
        language: material.language,
        title: &material.title,
        headings,
        bodies,
        words,
    };
    let indexed = store::knowledge::index(&mut tx, &passages).await?;
    if indexed.passages == 0 {
        tx.rollback().await?;
        return Ok(Promotion::Empty);
    }
    let processed = Processed {
        source: material.source_id,
        revision,
        owner,
        language: material.language,
        passages: indexed.passages,
        tokens: indexed.tokens,
    };
    let mut backlog = indexed.backlog;
    let previous = match store::knowledge::promote(&mut tx, &processed).await? {
        Promoted::Done { previous } => previous,
        Promoted::Superseded => {
            tx.rollback().await?;
            return Ok(Promotion::Superseded);
        }
        Promoted::Lost => {
            tx.rollback().await?;
            return Ok(Promotion::Lost);
        }
    };
    if let Some(previous) = previous {
        let freed = store::knowledge::retire(&mut tx, previous).await?;
        backlog.masks += 1;
        store::usage::adjust(&mut tx, material.workspace_id, &Delta::of(LimitKey::KnowledgeBytes, -freed)).await?;
    }
    tx.commit().await?;
    Ok(Promotion::Done(backlog))
}

/// Fails an unfinished revision with `code`, freeing its bytes; the active
/// revision is untouched. A revision finished meanwhile stays as it is.
pub async fn fail(pool: &PgPool, revision: RevisionId, code: &'static str) -> Result<Outcome> {
    let mut conn = crate::runtime::connection(pool).await?;
    let mut tx = conn.begin().await?;
    let Some(workspace) = store::knowledge::workspace_of(&mut tx, revision).await? else {
        tx.rollback().await?;
        return Ok(Outcome::Skipped);
    };
    store::knowledge::lock_source_of(&mut tx, revision).await?;
    let Some((_, bytes)) = store::knowledge::fail(&mut tx, revision, code).await? else {
        tx.rollback().await?;
        return Ok(Outcome::Skipped);
    };
    // Usage last (see `store::usage`).
    store::usage::adjust(&mut tx, workspace, &Delta::of(LimitKey::KnowledgeBytes, -bytes)).await?;
    tx.commit().await?;
    Ok(Outcome::Failed(code))
}

/// Renews an attempt's lease in the background until stopped.
struct Lease {
    stop: Arc<Notify>,
    /// Set once a renewal finds the lease taken (run out, and another attempt
    /// started).
    lost: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Lease {
    fn keep(pool: PgPool, revision: RevisionId, owner: String, lease: Duration) -> Self {
        let stop = Arc::new(Notify::new());
        let lost = Arc::new(AtomicBool::new(false));
        let (stopped, losing) = (stop.clone(), lost.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.notified() => return,
                    () = tokio::time::sleep(lease / 3) => {}
                }
                let renewed = match crate::runtime::connection(&pool).await {
                    Ok(mut conn) => {
                        store::knowledge::renew_lease(&mut conn, revision, &owner, lease.as_secs_f64()).await
                    }
                    Err(error) => Err(error),
                };
                match renewed {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%revision, owner, "the lease was lost; another attempt may have taken over");
                        losing.store(true, Ordering::Relaxed);
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(%revision, error = %crate::error::chain(&error), "could not renew a lease")
                    }
                }
            }
        });
        Self { stop, lost, task }
    }

    /// Whether no renewal has found the lease taken.
    fn held(&self) -> bool {
        !self.lost.load(Ordering::Relaxed)
    }

    async fn stop(mut self) {
        self.stop.notify_one();
        if let Err(error) = (&mut self.task).await {
            tracing::error!(%error, "the lease renewal task failed");
        }
    }
}

/// An attempt that panicked (apalis catches it) or was dropped mid-way stops
/// renewing its lease: the lease runs out and another attempt can start. A
/// detached renewal would hold the revision for as long as the process lives.
impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::{Choosing, process, process_next, take_next};
    use crate::knowledge::merge::maintain;
    use crate::reconcile::apply;
    use crate::runtime::sizes::{future_of_1, future_of_2, future_of_3, future_of_4};

    /// A worker job's future is moved whole as apalis, backon and tokio
    /// wrap, spawn and poll it: what a job awaits (processing, a merge, a
    /// reconcile run) holds none of sqlx's acquire future (8.6 kB in a
    /// release build), whose wait is boxed (`runtime::connection`).
    /// Unoptimized futures are sized otherwise (acquire's is 2.5 kB, ours
    /// larger): `cargo test --release` checks this one, and clippy refuses
    /// `Pool::acquire` outside `runtime::connection` in every build.
    #[test]
    #[cfg_attr(debug_assertions, ignore = "sizes of unoptimized futures; run with --release")]
    #[allow(clippy::disallowed_methods, reason = "its size, not a call")]
    fn a_jobs_futures_are_smaller_than_sqlxs_acquire() {
        let acquire = future_of_1(PgPool::acquire);
        for (name, size) in [
            ("process_next", future_of_2(process_next)),
            ("take_next", future_of_2(take_next)),
            ("process", future_of_3(process)),
            ("merge::maintain", future_of_3(maintain)),
            ("reconcile::apply", future_of_4(apply)),
        ] {
            assert!(size < acquire, "{name}: {size} bytes, acquire {acquire}");
        }
    }

    #[test]
    fn a_place_follows_the_others_still_choosing() {
        let choosing = Choosing::default();
        let first = choosing.join();
        let second = choosing.join();
        let third = choosing.join();
        assert_eq!((first.place(), second.place(), third.place()), (0, 1, 2));
        drop(first);
        drop(second);
        // The two it joined have left: it starts at the first candidate.
        assert_eq!(third.place(), 0);
        drop(third);
        assert_eq!(choosing.join().place(), 0);
    }
}
