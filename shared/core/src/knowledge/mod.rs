//! Knowledge Sources: what the API writes and the workers process (contract §9).
//!
//! The API stores a revision `pending` in the caller's transaction (or, for an
//! add, often in one statement that commits by itself) and hands a job to the
//! workers after the commit. A worker takes the revision for an
//! attempt (counted here, with a lease it keeps renewing), verifies and splits
//! the content, and in one transaction writes the passages and promotes the
//! revision with a compare-and-set on the source's candidate: a newer candidate
//! always wins, and a revision is never promoted twice. A failure marks the
//! revision `failed` and never touches the active one. The sweeper re-sends
//! work nobody holds and fails work past its deadline.
//!
//! Usage (`knowledge_bytes`) counts the content of revisions that are pending,
//! processing or active: every change of a revision's state in or out of those
//! adjusts it in the same transaction, as that transaction's last write (the
//! Workspace's usage row is shared by all its writers: see `store::usage`).

mod process;
pub mod statistics;
mod sweep;
pub mod waits;

pub use process::{Choosing, OnSettled, Outcome, Processing, Settled, process, process_next, take_next};
pub use sweep::{Sweep, sweep};
use waits::WaitCache;

use sqlx::PgConnection;
use svc_contract::knowledge::{KnowledgeSource, Provenance, Revision, SourceState};
use svc_contract::operations::knowledge_source::Submission;
use svc_contract::{Problem, ProblemCode};
use time::OffsetDateTime;

use crate::entitlements::{Entitlement, LimitKey};
use crate::error::Result;
use crate::ids::{AgentId, RevisionId, SourceId, WorkspaceId};
use crate::jobs::Job;
use crate::store::knowledge::{Added, HeldSource, NewRevision, RevisionFacts, Room, SourceRow, Standing};
use crate::store::types::{StoredProvenanceKind, StoredRevisionState};
use crate::store::usage::Delta;
use crate::store::workspaces::Held;
use crate::store::{self};
use crate::timestamp::millis;

/// Revision error codes (contract §9).
pub mod error_code {
    pub const DIGEST_MISMATCH: &str = "digest_mismatch";
    pub const EMPTY_CONTENT: &str = "empty_content";
    pub const PROCESSING_TIMEOUT: &str = "processing_timeout";
    pub const SUPERSEDED: &str = "superseded";
    pub const INTERNAL: &str = "internal";
}

/// The state a source shows, from its revisions: `replacing` while a candidate
/// is unfinished beside an active revision, the candidate's state while there
/// is none, `active` with an active revision otherwise (a failed candidate
/// beside it included), and `failed` when nothing ever became active.
pub fn source_state(active: bool, candidate: Option<StoredRevisionState>) -> SourceState {
    match (active, candidate) {
        (true, Some(StoredRevisionState::Pending | StoredRevisionState::Processing)) => SourceState::Replacing,
        (false, Some(StoredRevisionState::Pending)) => SourceState::Pending,
        (false, Some(StoredRevisionState::Processing)) => SourceState::Processing,
        (true, _) => SourceState::Active,
        (false, _) => SourceState::Failed,
    }
}

fn revision(
    id: Option<RevisionId>,
    revision: Option<String>,
    digest: Option<String>,
    state: Option<StoredRevisionState>,
    imported_at: Option<OffsetDateTime>,
    error_code: Option<String>,
) -> Option<Revision> {
    Some(Revision {
        id: id?.to_string(),
        revision: revision?,
        digest: digest?,
        state: state?.shown()?,
        imported_at: millis(imported_at?),
        error_code,
    })
}

impl From<SourceRow> for KnowledgeSource {
    fn from(row: SourceRow) -> Self {
        let state = source_state(row.active_id.is_some(), row.candidate_state);
        KnowledgeSource {
            id: row.id.to_string(),
            workspace_id: row.workspace_id.to_string(),
            agent_id: row.agent_id.to_string(),
            key: row.key,
            title: row.title,
            provenance: Provenance { kind: row.provenance_kind.into(), uri: row.provenance_uri },
            revision: row.revision,
            digest: row.digest,
            required: row.required,
            imported_at: millis(row.imported_at),
            state,
            active_revision: revision(
                row.active_id,
                row.active_revision,
                row.active_digest,
                row.active_state,
                row.active_imported_at,
                row.active_error_code,
            ),
            pending_revision: revision(
                row.candidate_id,
                row.candidate_revision,
                row.candidate_digest,
                row.candidate_state,
                row.candidate_imported_at,
                row.candidate_error_code,
            ),
        }
    }
}

/// What a source's latest revision states of its content: what a replace or
/// a reconcile entry is compared with ([`repeats`]).
#[derive(Clone, Copy, Debug)]
pub struct Latest<'a> {
    pub state: StoredRevisionState,
    pub revision: &'a str,
    pub digest: &'a str,
    pub title: &'a str,
    pub provenance_kind: StoredProvenanceKind,
    pub provenance_uri: &'a str,
    pub required: bool,
}

impl<'a> From<&'a RevisionFacts> for Latest<'a> {
    fn from(facts: &'a RevisionFacts) -> Self {
        Self {
            state: facts.state,
            revision: &facts.revision,
            digest: &facts.digest,
            title: &facts.title,
            provenance_kind: facts.provenance_kind,
            provenance_uri: &facts.provenance_uri,
            required: facts.required,
        }
    }
}

/// A source's row states its latest revision's metadata at the top level.
impl<'a> From<&'a SourceRow> for Latest<'a> {
    fn from(row: &'a SourceRow) -> Self {
        Self {
            state: row.latest_state,
            revision: &row.revision,
            digest: &row.digest,
            title: &row.title,
            provenance_kind: row.provenance_kind,
            provenance_uri: &row.provenance_uri,
            required: row.required,
        }
    }
}

/// Whether `submission` says what the latest revision says (digest, title,
/// provenance, revision, required) and that revision still holds its content
/// (a failed one is submitted again): a replace or a reconcile entry that
/// changes nothing.
pub fn repeats(submission: &Submission, latest: Latest<'_>) -> bool {
    latest.state.holds_content()
        && latest.digest == submission.digest
        && latest.title == submission.title
        && latest.revision == submission.revision
        && latest.required == submission.required
        && latest.provenance_kind == StoredProvenanceKind::from(submission.provenance.kind)
        && latest.provenance_uri == submission.provenance.uri
}

/// The revision row a submission becomes.
fn new_revision(
    submission: &Submission,
    id: RevisionId,
    source: SourceId,
    workspace: WorkspaceId,
    agent: AgentId,
) -> NewRevision<'_> {
    NewRevision {
        id,
        source_id: source,
        workspace_id: workspace,
        agent_id: agent,
        revision: &submission.revision,
        digest: &submission.digest,
        title: &submission.title,
        provenance_kind: submission.provenance.kind.into(),
        provenance_uri: &submission.provenance.uri,
        required: submission.required,
        content: &submission.content,
    }
}

/// A submission's size in `knowledge_bytes`.
fn bytes(submission: &Submission) -> i64 {
    i64::try_from(submission.bytes()).unwrap_or(i64::MAX)
}

/// The Workspace a knowledge write acts on, with the Entitlement its limits
/// come from.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub workspace: WorkspaceId,
    pub agent: AgentId,
    pub entitlement: &'a Entitlement,
}

fn agent_not_found() -> Problem {
    Problem::not_found("Agent")
}

fn source_not_found() -> Problem {
    Problem::not_found("Knowledge Source")
}

/// The ids an add gives its source and first revision, chosen once per call:
/// every attempt of the call writes these, so an attempt whose outcome was
/// lost with its connection is recognised by the next ([`add`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewIds {
    pub source: SourceId,
    pub revision: RevisionId,
}

impl NewIds {
    pub fn fresh() -> Self {
        Self { source: SourceId::new(), revision: RevisionId::new() }
    }
}

/// The usage one add grows.
fn add_delta(submission: &Submission) -> Delta {
    Delta::of(LimitKey::KnowledgeSources, 1).and(Delta::of(LimitKey::KnowledgeBytes, bytes(submission)))
}

/// knowledge_source.add of a verified submission: a new source with a
/// pending revision, within the `knowledge_sources` and `knowledge_bytes`
/// limits; returns it as the resource shows it.
///
/// One statement holds the Workspace and the Agent, inserts both rows and,
/// most of the time, counts the usage on a shard under the limits of
/// `scope.entitlement` (the Entitlement the call was admitted with; see
/// [`store::knowledge::Room`]). `admit` then judges the Workspace as that
/// statement holds it (archived, Entitlement) before anything else is
/// reported, and usage the statement could not count is reserved under the
/// Entitlement held. The usage is counted last, so concurrent adds of a
/// Workspace wait for each other only for the end of a transaction.
///
/// A live source with the key and the id of `ids` is this call's own,
/// written by an attempt whose outcome was lost ([`add_alone`]): it is
/// answered as added.
pub async fn add(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    key: &str,
    submission: &Submission,
    ids: NewIds,
    admit: impl FnOnce(&Held) -> Result<()>,
) -> Result<(SourceRow, Job)> {
    debug_assert!(submission.verify().is_ok(), "add of an unverified submission");
    let wanted = add_delta(submission);
    let first = new_revision(submission, ids.revision, ids.source, scope.workspace, scope.agent);
    let (held, added) = store::knowledge::add_source(conn, key, &first, &Room::under(scope.entitlement), None).await?;
    let existing = match added {
        Added::KeyExists => store::knowledge::id_by_key(conn, scope.agent, key).await?,
        _ => None,
    };
    if existing == Some(ids.source)
        && let Some(row) = store::knowledge::get(conn, scope.workspace, scope.agent, ids.source).await?
    {
        return Ok((row, Job::ProcessRevision { revision: ids.revision }));
    }
    admit(&held)?;
    let entitlement = &held.entitlement;
    let (row, room_taken) = match added {
        Added::Added { row, room_taken } => (row, room_taken),
        Added::NoAgent => return Err(agent_not_found().into()),
        Added::KeyExists => {
            // Over a limit, the limit is the answer (the contract's order of checks).
            store::usage::check_room(conn, scope.workspace, entitlement, &wanted).await?;
            let mut problem = Problem::invalid("key_exists", "A live source of this Agent already has this key.")
                .with_detail("key", key);
            if let Some(existing) = existing {
                problem = problem.with_detail("sourceId", existing.to_string());
            }
            return Err(problem.into());
        }
    };
    if !room_taken {
        store::usage::reserve_within_limits(conn, scope.workspace, entitlement, &wanted).await?;
    }
    Ok((*row, Job::ProcessRevision { revision: ids.revision }))
}

/// [`add`] as one statement that commits by itself, for a call outside any
/// transaction (two round trips fewer: no `BEGIN`, no `COMMIT`), admitted
/// under `standing` and `scope.entitlement` (the Workspace as the call path
/// read it). It writes only in the common case: the Workspace's row, held by
/// the statement, is still so, the Agent is live, the key is free and a usage
/// shard has room; `None` when it wrote nothing, and [`add`] in a transaction
/// gives the answer. A lost connection leaves its outcome unknown: `add` in
/// a transaction with the same `ids` then finds the source if it was written.
pub async fn add_alone(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    key: &str,
    submission: &Submission,
    ids: NewIds,
    standing: &Standing,
) -> Result<Option<(SourceRow, Job)>> {
    debug_assert!(submission.verify().is_ok(), "add of an unverified submission");
    let first = new_revision(submission, ids.revision, ids.source, scope.workspace, scope.agent);
    let room = Room::under(scope.entitlement);
    match store::knowledge::add_source(conn, key, &first, &room, Some(standing)).await {
        Ok((_, Added::Added { row, room_taken: true })) => {
            Ok(Some((*row, Job::ProcessRevision { revision: ids.revision })))
        }
        // Committed, so never: the statement fails instead (`UNCOUNTED`).
        Ok((_, Added::Added { room_taken: false, .. })) => {
            Err(crate::error::Error::internal("an add outside a transaction was written without its usage"))
        }
        Ok(_) => Ok(None),
        Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some(store::knowledge::UNCOUNTED) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// What a replace did.
pub enum Replaced {
    /// A new candidate, to be processed.
    Candidate(Job),
    /// The submission equals the latest revision, which is active or still to
    /// be processed: nothing changed.
    Unchanged,
}

/// knowledge_source.replace of a verified submission: a new candidate beside
/// the active revision. An unfinished candidate it supersedes is failed
/// (`superseded`) and its bytes freed before the `knowledge_bytes` limit is
/// checked for the new one.
pub async fn replace(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    source: SourceId,
    submission: &Submission,
) -> Result<Replaced> {
    debug_assert!(submission.verify().is_ok(), "replace of an unverified submission");
    let held =
        store::knowledge::lock(conn, scope.workspace, scope.agent, source).await?.ok_or_else(source_not_found)?;
    replace_held(conn, scope, &held, submission).await
}

/// [`replace`] once its source is locked.
async fn replace_held(
    conn: &mut PgConnection,
    scope: Scope<'_>,
    held: &HeldSource,
    submission: &Submission,
) -> Result<Replaced> {
    if repeats(submission, Latest::from(&held.latest)) {
        return Ok(Replaced::Unchanged);
    }
    let mut freed = 0;
    if let Some(candidate) = &held.candidate
        && candidate.state.is_unfinished()
        && let Some((_, bytes)) = store::knowledge::fail(conn, candidate.id, error_code::SUPERSEDED).await?
    {
        freed = bytes;
    }
    let revision = RevisionId::new();
    store::knowledge::insert_revision(conn, &new_revision(submission, revision, held.id, scope.workspace, scope.agent))
        .await?;
    store::knowledge::set_candidate(conn, held.id, revision).await?;
    // Usage last, in one change: the superseded candidate's bytes are freed
    // before the new revision's are checked against the limit.
    let (wanted, freed) =
        (Delta::of(LimitKey::KnowledgeBytes, bytes(submission)), Delta::of(LimitKey::KnowledgeBytes, -freed));
    store::usage::reserve_within_limits_freeing(conn, scope.workspace, scope.entitlement, &wanted, &freed).await?;
    Ok(Replaced::Candidate(Job::ProcessRevision { revision }))
}

/// knowledge_source.delete: the source stops answering at once and is gone
/// from list and inspect; an unfinished candidate is failed, and its usage freed.
pub async fn delete(conn: &mut PgConnection, scope: Scope<'_>, source: SourceId) -> Result<()> {
    let held =
        store::knowledge::lock(conn, scope.workspace, scope.agent, source).await?.ok_or_else(source_not_found)?;
    delete_held(conn, scope, &held).await
}

/// [`delete`] for a source already locked.
pub async fn delete_held(conn: &mut PgConnection, scope: Scope<'_>, held: &HeldSource) -> Result<()> {
    let mut freed = 0;
    if let Some(candidate) = &held.candidate
        && candidate.state.is_unfinished()
        && let Some((_, bytes)) = store::knowledge::fail(conn, candidate.id, error_code::SUPERSEDED).await?
    {
        freed += bytes;
    }
    if let Some(active) = &held.active {
        svc_search::retire(conn, active.id).await?;
        freed += store::knowledge::retire(conn, active.id).await?;
    }
    store::knowledge::delete_source(conn, held.id).await?;
    let delta = Delta::of(LimitKey::KnowledgeSources, -1).and(Delta::of(LimitKey::KnowledgeBytes, -freed));
    store::usage::adjust(conn, scope.workspace, &delta).await?;
    Ok(())
}

/// Deletes every live source of an Agent being deleted; returns the usage
/// they freed, for the caller to apply as its last write.
pub async fn delete_all_of(conn: &mut PgConnection, agent: AgentId) -> Result<Delta> {
    let (sources, failed) = store::knowledge::delete_all_of(conn, agent).await?;
    svc_search::drop_agent(conn, agent).await?;
    let retired = store::knowledge::retire_all_of(conn, agent).await?;
    let freed = failed + retired;
    Ok(Delta::of(LimitKey::KnowledgeSources, -sources).and(Delta::of(LimitKey::KnowledgeBytes, -freed)))
}

/// A source as knowledge_source.wait reports it.
pub struct Waited {
    pub source: KnowledgeSource,
    /// No revision is pending or processing.
    pub terminal: bool,
}

/// knowledge_source.wait: a plain read. `processing_failed` (422) when the
/// latest revision failed, `processing_timeout` (504) when it ran past the
/// processing deadline, each with the source in `details.knowledgeSource`.
/// (A candidate, when there is one, is always the latest revision.)
pub fn waited(row: SourceRow) -> Result<Waited, Problem> {
    let latest_failed = row.candidate_state == Some(StoredRevisionState::Failed);
    let error_code = row.candidate_error_code.clone();
    let terminal = !row.candidate_state.is_some_and(StoredRevisionState::is_unfinished);
    let source = KnowledgeSource::from(row);
    if latest_failed {
        let details = serde_json::to_value(&source).unwrap_or_default();
        let problem = if error_code.as_deref() == Some(error_code::PROCESSING_TIMEOUT) {
            Problem::new(ProblemCode::ProcessingTimeout, "Processing of the latest revision did not finish in time.")
        } else {
            Problem::new(ProblemCode::ProcessingFailed, "Processing of the latest revision failed.")
        };
        return Err(problem
            .with_detail("errorCode", error_code.unwrap_or_default())
            .with_detail("knowledgeSource", details));
    }
    Ok(Waited { source, terminal })
}

/// knowledge_source.wait's read: while the source is still being processed,
/// the answer kept in `cache` (see [`waits`]); otherwise its row, kept if it
/// is still not terminal. `None`: no such live source of the Agent's.
pub async fn wait(
    conn: &mut PgConnection,
    cache: &WaitCache,
    workspace: WorkspaceId,
    agent: AgentId,
    id: SourceId,
) -> Result<Option<Waited>> {
    if let Some(source) = cache.get(workspace, agent, id) {
        return Ok(Some(Waited { source, terminal: false }));
    }
    let ticket = cache.ticket(id);
    let Some(row) = store::knowledge::get(conn, workspace, agent, id).await? else { return Ok(None) };
    let waited = waited(row)?;
    if let Some(ticket) = ticket
        && !waited.terminal
    {
        cache.keep(ticket, workspace, agent, id, &waited.source);
    }
    Ok(Some(waited))
}

/// When to ask again: from 100 ms with an empty queue up to 5 s as it grows.
pub fn retry_after_ms(backlog: i64) -> u64 {
    (100 + 50 * backlog.max(0) as u64).min(5_000)
}

/// The number of unfinished revisions, as `wait` reports it on every call: read
/// from PostgreSQL at most once a second, by whichever call finds it stale.
pub struct Backlog {
    count: std::sync::atomic::AtomicI64,
    /// Milliseconds since `epoch` of the last read.
    read_at: std::sync::atomic::AtomicU64,
    epoch: std::time::Instant,
}

impl Default for Backlog {
    fn default() -> Self {
        Self {
            count: std::sync::atomic::AtomicI64::new(0),
            read_at: std::sync::atomic::AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        }
    }
}

impl Backlog {
    const FRESH_MS: u64 = 1_000;

    /// The figure, read again if it is a second old. A failed read keeps the
    /// last figure, unless the connection was lost: that is the caller's to
    /// know (it must not keep the connection), and is returned.
    pub async fn get(&self, conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.epoch.elapsed().as_millis() as u64 + Self::FRESH_MS;
        let read_at = self.read_at.load(Relaxed);
        // One caller per second wins the right to read; the others use the figure.
        if Self::stale(now, read_at) && self.read_at.compare_exchange(read_at, now, Relaxed, Relaxed).is_ok() {
            match store::knowledge::backlog(conn).await {
                Ok(pending) => self.count.store(pending.revisions, Relaxed),
                Err(error) if crate::error::fault(&error) == crate::error::Fault::ConnectionLost => {
                    // Still due: the next caller (the retry, most likely)
                    // reads it.
                    self.read_at.store(read_at, Relaxed);
                    return Err(error);
                }
                Err(error) => tracing::warn!(error = %crate::error::chain(&error), "could not read the backlog"),
            }
        }
        Ok(self.count.load(Relaxed))
    }

    /// Whether a figure read at `read_at` is due again at `now`. Another thread
    /// may have stored a later `read_at` after this one read the clock: such a
    /// figure is fresh, not a wrap-around.
    fn stale(now: u64, read_at: u64) -> bool {
        now.saturating_sub(read_at) >= Self::FRESH_MS
    }
}

#[cfg(test)]
mod tests {
    use super::StoredRevisionState::*;
    use super::*;

    #[test]
    fn source_states_follow_their_revisions() {
        assert_eq!(source_state(false, Some(Pending)), SourceState::Pending);
        assert_eq!(source_state(false, Some(Processing)), SourceState::Processing);
        assert_eq!(source_state(false, Some(Failed)), SourceState::Failed);
        assert_eq!(source_state(true, Some(Pending)), SourceState::Replacing);
        assert_eq!(source_state(true, Some(Processing)), SourceState::Replacing);
        assert_eq!(source_state(true, Some(Failed)), SourceState::Active, "the last good revision still answers");
        assert_eq!(source_state(true, None), SourceState::Active);
    }

    #[test]
    fn a_backlog_read_by_another_thread_after_this_clock_reading_is_fresh() {
        assert!(Backlog::stale(5_000, 3_000));
        assert!(!Backlog::stale(5_000, 4_500));
        // Another thread read the clock later and stored it first.
        assert!(!Backlog::stale(5_000, 5_200));
    }

    #[test]
    fn retry_hints_grow_with_the_queue_within_bounds() {
        assert_eq!(retry_after_ms(0), 100);
        assert!(retry_after_ms(10) > retry_after_ms(1));
        assert_eq!(retry_after_ms(1_000_000), 5_000);
        assert_eq!(retry_after_ms(-3), 100);
    }
}
