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
//!   freezes, or is cut off) loses it within `lease`, and another attempt can
//!   start; an attempt that finds its lease taken stops at once;
//! - passages and the promotion commit together, and only if this worker still
//!   holds the lease and the revision is still the source's candidate: a newer
//!   candidate always wins, and nothing is promoted twice;
//! - an attempt cut short by this process itself (its job dropped by a queue
//!   consumer's restart, a shutdown) or by the infrastructure (a lost
//!   connection, contention) is handed back at once and does not count; one
//!   cut while its promotion commits is recorded as promoted if it was
//!   ([`Settled`]). Only the content's own failures count: a statement
//!   timeout, a crash of the worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};

use super::error_code;
use crate::embeddings::Embeddings;
use crate::entitlements::LimitKey;
use crate::error::{Error, Result};
use crate::ids::RevisionId;
use crate::lease::Renewal;
use crate::store::knowledge::{Claimed, Material, Processed, Promoted, Refusal};
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
    /// Told what became of attempts cut short before their caller saw them end.
    pub on_settled: OnSettled,
    /// What embeds passages (`None`: vectors are off, answers go by words).
    pub embeddings: Option<Arc<Embeddings>>,
}

/// What became of an attempt whose caller stopped waiting for it (its job
/// dropped), once its own connection finished what it had sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Its promotion had committed: the revision is active.
    Promoted,
    /// It held the revision: the lease is given up and the attempt not counted.
    HandedBack,
    /// Nothing of it was left to settle (it had not started, or another
    /// attempt holds the revision now).
    Nothing,
}

/// Where a worker records what became of attempts cut short (its metrics).
#[derive(Clone, Default)]
pub struct OnSettled(Option<Arc<dyn Fn(Settled) + Send + Sync>>);

impl OnSettled {
    pub fn new(record: impl Fn(Settled) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(record)))
    }

    fn record(&self, settled: Settled) {
        if let Some(record) = &self.0 {
            record(settled);
        }
    }
}

impl std::fmt::Debug for OnSettled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "OnSettled(recording)" } else { "OnSettled(none)" })
    }
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
        Some(Chosen::Attempt(started)) => {
            let (attempt, material) = *started;
            run(attempt, processing, material).await?
        }
    }))
}

/// What [`choose`] found next in turn.
enum Chosen {
    /// An attempt started on the revision (boxed: it is larger than the rest).
    Attempt(Box<(Attempt, Material)>),
    /// The revision must fail with this error code.
    Fail(RevisionId, &'static str),
}

/// The revision next in turn, once an attempt started on it or it must fail;
/// `None` when nothing is left that nobody holds. The job leaves the others
/// choosing before it runs the attempt.
async fn choose(pool: &PgPool, processing: &Processing) -> Result<Option<Chosen>> {
    let chooser = processing.choosing.join();
    for _ in 0..MAX_LOOKS {
        let mut conn = crate::runtime::connection(pool).await?;
        let mut candidates = store::knowledge::next_in_turn(&mut conn, CANDIDATES).await?;
        if candidates.is_empty() {
            return Ok(None);
        }
        let first = chooser.place() % candidates.len();
        candidates.rotate_left(first);
        let last = candidates.len() - 1;
        let mut conn = Some(conn);
        for (i, revision) in candidates.into_iter().enumerate() {
            let mut attempt = Attempt::new(pool, revision, processing, conn.take());
            // Another job starting an attempt holds its source: the next
            // candidate rather than a wait, so jobs claiming at the same
            // moment spread over the candidates; the last one is waited for.
            let source = if i < last { Source::SkipIfHeld } else { Source::Wait };
            match begin(&mut attempt, processing, source).await? {
                // Another attempt took it meanwhile: the next in turn.
                Begin::Skip => conn = attempt.disarm(),
                Begin::Fail(code) => {
                    attempt.disarm();
                    return Ok(Some(Chosen::Fail(revision, code)));
                }
                Begin::Attempt(material) => return Ok(Some(Chosen::Attempt(Box::new((attempt, material))))),
            }
        }
    }
    tracing::warn!("found only revisions others had taken, {MAX_LOOKS} times over; the sweeper wakes what is left");
    Ok(None)
}

/// Processes `revision` once (see the module documentation). An `Err` is a
/// failure the attempt could not get past: a transient one (the database
/// unreachable past the deadline) gives the attempt back, so it does not
/// count towards `max_attempts`; any other counts.
pub async fn process(pool: &PgPool, revision: RevisionId, processing: &Processing) -> Result<Outcome> {
    let mut attempt = Attempt::new(pool, revision, processing, None);
    match begin(&mut attempt, processing, Source::Wait).await? {
        Begin::Skip => {
            attempt.disarm();
            Ok(Outcome::Skipped)
        }
        Begin::Fail(code) => {
            attempt.disarm();
            fail(pool, revision, code).await
        }
        Begin::Attempt(material) => run(attempt, processing, material).await,
    }
}

/// Runs the attempt begun on `material`, under its lease, until it ends,
/// finds its lease taken, or runs past the processing deadline.
async fn run(mut attempt: Attempt, processing: &Processing, material: Material) -> Result<Outcome> {
    let lease = renewal(&attempt, processing.lease);
    let until = Instant::now() + processing.deadline;
    let result = tokio::select! {
        result = attempt_until_done(&mut attempt, &lease, until, material) => result,
        // Another attempt holds the revision now: stop, whatever was under way
        // (its transaction is rolled back with the connection's next use).
        () = lease.lost() => Ok(Outcome::Skipped),
    };
    lease.stop().await;
    if let Err(error) = &result {
        // Give the lease up at once so the next job need not wait it out; a
        // transient failure gives the attempt back too.
        let transient = crate::error::worth_waiting_for(error);
        if let Err(error) = attempt.release(transient).await {
            let revision = attempt.revision;
            tracing::warn!(%revision, error = %crate::error::chain(&error), "could not release a lease; it runs out by itself");
        }
    }
    attempt.disarm();
    result
}

/// Renews `attempt`'s lease every third of `length`.
fn renewal(attempt: &Attempt, length: Duration) -> Renewal {
    let (pool, revision, owner) = (attempt.pool.clone(), attempt.revision, attempt.owner.clone());
    let secs = length.as_secs_f64();
    Renewal::keep(
        format!("revision {revision} {owner}"),
        length,
        Arc::new(move || {
            let (pool, owner) = (pool.clone(), owner.clone());
            Box::pin(async move {
                let mut conn = crate::runtime::connection(&pool).await?;
                Ok(store::knowledge::renew_lease(&mut conn, revision, &owner, secs).await?)
            })
        }),
    )
}

/// Runs the attempt, and again after each transient failure (contention, a
/// lost connection, the database unavailable), backing off, while it holds
/// its lease and until the processing deadline: waiting on another holder's
/// lock is not a failed attempt. The first try uses the claim's `material`;
/// a later one reads it again (the Agent's language may have changed
/// meanwhile).
async fn attempt_until_done(
    attempt: &mut Attempt,
    lease: &Renewal,
    until: Instant,
    material: Material,
) -> Result<Outcome> {
    let mut backoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times()
        .build();
    let mut claimed = Some(material);
    loop {
        let error = match attempt_once(attempt, claimed.take()).await {
            Err(error) if crate::error::worth_waiting_for(&error) && lease.held() && Instant::now() < until => error,
            ended => return ended,
        };
        attempt.after(&error);
        let delay = backoff.next().unwrap_or(Duration::from_secs(2));
        crate::faults::retried(crate::faults::Retry::Work);
        let revision = attempt.revision;
        tracing::warn!(%revision, error = %crate::error::chain(&error), ?delay, "attempt interrupted; trying again");
        tokio::time::sleep(delay).await;
    }
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

/// Starts `attempt` on its revision, or says why not.
async fn begin(attempt: &mut Attempt, processing: &Processing, source: Source) -> Result<Begin> {
    let owner = attempt.owner.clone();
    let claim = store::knowledge::Claim {
        owner: &owner,
        lease_secs: processing.lease.as_secs_f64(),
        deadline_secs: processing.deadline.as_secs_f64(),
        max_attempts: processing.max_attempts,
        wait: matches!(source, Source::Wait),
    };
    let revision = attempt.revision;
    let claimed = store::knowledge::claim(attempt.conn().await?, revision, &claim).await?;
    Ok(match claimed {
        None => Begin::Skip,
        Some(Claimed::Started(material)) => Begin::Attempt(material),
        Some(Claimed::NotStarted(Refusal::Held)) => Begin::Skip,
        Some(Claimed::NotStarted(Refusal::Overdue)) => Begin::Fail(error_code::PROCESSING_TIMEOUT),
        Some(Claimed::NotStarted(Refusal::OutOfAttempts)) => Begin::Fail(error_code::INTERNAL),
    })
}

/// One try of an attempt on its revision, on `material` if given (else read
/// now).
async fn attempt_once(attempt: &mut Attempt, material: Option<Material>) -> Result<Outcome> {
    let revision = attempt.revision;
    let material = match material {
        Some(material) => material,
        None => store::knowledge::material(attempt.conn().await?, revision)
            .await?
            .ok_or_else(|| Error::internal("revision vanished"))?,
    };
    let Some(content) = material.content.as_deref() else {
        // Its content was dropped: it was failed or replaced meanwhile.
        return Ok(Outcome::Skipped);
    };
    if svc_contract::digest::sha256_prefixed(content.as_bytes()) != material.digest {
        return fail_on(attempt.conn().await?, revision, error_code::DIGEST_MISMATCH).await;
    }
    let split = svc_search::split(content);
    let title_words = svc_search::words(&material.title);
    let words = split
        .iter()
        .map(|p| title_words + p.heading.as_deref().map_or(0, svc_search::words) + svc_search::words(&p.body))
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .collect();
    let (headings, bodies): (Vec<Option<String>>, Vec<String>) = split.into_iter().map(|p| (p.heading, p.body)).unzip();
    // Embedded before the promotion's transaction, which holds locks. A
    // model endpoint that does not answer holds nothing up: the revision is
    // promoted without vectors (it answers by its words) and the sweep embeds
    // it later (`svc_search::embed_due`).
    let vectors = match &attempt.embeddings {
        Some(embeddings) => {
            let texts: Vec<String> = headings
                .iter()
                .zip(&bodies)
                .map(|(heading, body)| svc_search::passage_text(&material.title, heading.as_deref(), body))
                .collect();
            match svc_search::embed_passages(&**embeddings, &texts).await {
                Ok(vectors) => Some((embeddings.clone(), vectors)),
                Err(error) => {
                    tracing::warn!(%revision, %error, "could not embed the passages; promoted without vectors");
                    None
                }
            }
        }
        None => None,
    };
    let passages = Written { headings, bodies, words, vectors };
    let owner = attempt.owner.clone();
    let promotion = promote(attempt.conn().await?, revision, &owner, &material, passages).await?;
    match promotion {
        Promotion::Done(backlog) => {
            // Housekeeping of the Agent's index, after the commit: the
            // promotion stands whatever becomes of it (the sweep merges what
            // is left).
            if let Err(error) = svc_search::maintain(&attempt.pool, material.agent_id, Some(backlog)).await {
                tracing::warn!(agent = %material.agent_id, error = %crate::error::chain(&error), "could not merge the index");
            }
            Ok(Outcome::Promoted)
        }
        Promotion::Empty => fail_on(attempt.conn().await?, revision, error_code::EMPTY_CONTENT).await,
        Promotion::Lost => Ok(Outcome::Skipped),
        Promotion::Superseded => {
            fail_on(attempt.conn().await?, revision, error_code::SUPERSEDED).await.map(|_| Outcome::Skipped)
        }
    }
}

enum Promotion {
    /// Promoted, leaving the Agent's index with this merge backlog.
    Done(svc_search::Backlog),
    /// Nothing indexable.
    Empty,
    /// This worker no longer holds the revision.
    Lost,
    /// The source's candidate is another revision now (or the source is gone).
    Superseded,
}

/// A revision's passages as the index takes them.
struct Written {
    headings: Vec<Option<String>>,
    bodies: Vec<String>,
    words: Vec<i32>,
    /// Their vectors, and the model that made them.
    vectors: Option<(Arc<Embeddings>, Vec<svc_embed::Quantized>)>,
}

/// Writes the passages and promotes the revision, all in one transaction. Locks
/// follow the store's order: the source, then revisions, and the Workspace's
/// usage row last, only when a replaced revision frees bytes: a first revision
/// leaves usage alone (its bytes were counted when it was added), so
/// promotions never hold up the Workspace's adds.
async fn promote(
    conn: &mut PgConnection,
    revision: RevisionId,
    owner: &str,
    material: &Material,
    written: Written,
) -> Result<Promotion> {
    let (model, vectors) = written.vectors.unzip();
    let mut tx = conn.begin().await?;
    let passages = svc_search::Passages {
        revision,
        source: material.source_id,
        agent: material.agent_id,
        language: material.language.into(),
        title: &material.title,
        headings: written.headings,
        bodies: written.bodies,
        words: written.words,
        vectors: model
            .as_ref()
            .zip(vectors)
            .map(|(model, vectors)| svc_search::Embedded { model: model.id(), vectors }),
    };
    let indexed = svc_search::index(&mut tx, &passages).await?;
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
        svc_search::retire(&mut tx, previous).await?;
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
    fail_on(&mut conn, revision, code).await
}

/// [`fail`] on a connection of the caller's.
async fn fail_on(conn: &mut PgConnection, revision: RevisionId, code: &'static str) -> Result<Outcome> {
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

/// Longest a cut attempt's settlement may take (its connection finishing what
/// it had sent, within the statement timeout, then two statements).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// One attempt: its name (the lease's owner), the connection its steps run
/// on, one after another, and what to do should it be dropped before it is
/// [`disarm`](Attempt::disarm)ed: settle it in the background ([`settle`]).
struct Attempt {
    pool: PgPool,
    revision: RevisionId,
    owner: String,
    conn: Option<PoolConnection<Postgres>>,
    armed: bool,
    on_settled: OnSettled,
    embeddings: Option<Arc<Embeddings>>,
}

impl Attempt {
    fn new(
        pool: &PgPool,
        revision: RevisionId,
        processing: &Processing,
        conn: Option<PoolConnection<Postgres>>,
    ) -> Self {
        Self {
            pool: pool.clone(),
            revision,
            owner: processing.attempt_name(),
            conn,
            armed: true,
            on_settled: processing.on_settled.clone(),
            embeddings: processing.embeddings.clone(),
        }
    }

    /// The attempt's connection, taken from the pool the first time (and
    /// after one was lost).
    async fn conn(&mut self) -> Result<&mut PgConnection> {
        if self.conn.is_none() {
            self.conn = Some(crate::runtime::connection(&self.pool).await?);
        }
        match self.conn.as_deref_mut() {
            Some(conn) => Ok(conn),
            None => Err(Error::internal("the attempt has no connection")),
        }
    }

    /// After a failed step: a lost connection is closed, the next step takes another.
    fn after(&mut self, error: &Error) {
        if matches!(error.fault(), crate::error::Fault::ConnectionLost)
            && let Some(mut conn) = self.conn.take()
        {
            conn.close_on_drop();
        }
    }

    /// Gives the lease up (and with `give_back`, the attempt), on a
    /// connection known to be alive.
    async fn release(&mut self, give_back: bool) -> Result<bool> {
        if let Some(mut conn) = self.conn.take()
            && Connection::ping(&mut *conn).await.is_ok()
        {
            self.conn = Some(conn);
        }
        if self.conn.is_none() {
            self.conn = Some(crate::runtime::live_connection(&self.pool).await?);
        }
        let revision = self.revision;
        let owner = self.owner.clone();
        Ok(store::knowledge::release_lease(self.conn().await?, revision, &owner, give_back).await?)
    }

    /// The attempt ended where its caller saw it: nothing to settle. Its
    /// connection, for another use.
    fn disarm(mut self) -> Option<PoolConnection<Postgres>> {
        self.armed = false;
        self.conn.take()
    }
}

/// Dropped armed, the attempt was cut short by its caller (a job dropped by a
/// consumer's restart or a shutdown, the task aborted): settled in the
/// background, and recorded.
impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (pool, revision, owner, conn) = (self.pool.clone(), self.revision, self.owner.clone(), self.conn.take());
        let on_settled = self.on_settled.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            match tokio::time::timeout(SETTLE_LIMIT, settle(&pool, conn, revision, &owner)).await {
                Ok(Ok(settled)) => {
                    tracing::info!(%revision, ?settled, "an attempt cut short by this worker is settled");
                    on_settled.record(settled);
                }
                Ok(Err(error)) => tracing::warn!(%revision, error = %crate::error::chain(&error), "could not settle an attempt cut short; its lease runs out by itself"),
                Err(_) => tracing::warn!(%revision, "could not settle an attempt cut short in time; its lease runs out by itself"),
            }
        });
    }
}

/// What became of an attempt cut short. Its own connection goes first: what
/// it had sent finishes there (a claim waiting for a lock, a COMMIT under
/// way) or is rolled back (a transaction it had open), so what is read after
/// is final. Then the attempt, if it still holds the revision, is handed
/// back uncounted; if not, the revision tells whether its promotion committed.
async fn settle(
    pool: &PgPool,
    conn: Option<PoolConnection<Postgres>>,
    revision: RevisionId,
    owner: &str,
) -> Result<Settled> {
    let mut conn = match conn {
        Some(mut conn) => match Connection::ping(&mut *conn).await {
            Ok(()) => conn,
            Err(_) => {
                conn.close_on_drop();
                crate::runtime::live_connection(pool).await?
            }
        },
        None => crate::runtime::live_connection(pool).await?,
    };
    if store::knowledge::release_lease(&mut conn, revision, owner, true).await? {
        return Ok(Settled::HandedBack);
    }
    Ok(if store::knowledge::promoted_by(&mut conn, revision, owner).await? {
        Settled::Promoted
    } else {
        Settled::Nothing
    })
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::{Choosing, process, process_next, take_next};
    use crate::runtime::sizes::{future_of_1, future_of_2, future_of_3};
    use svc_search::maintain;

    /// A worker job's future is moved whole as apalis, backon and tokio
    /// wrap, spawn and poll it: what a job awaits (processing, a merge; a
    /// reconcile run's has its own test) holds none of sqlx's acquire future
    /// (8.6 kB in a release build), whose wait is boxed (`runtime::connection`).
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
