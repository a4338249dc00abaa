//! knowledge_source.reconcile (contract §11): a manifest of an Agent's desired
//! Knowledge, planned by the API on every call and, when applied, stored as a
//! run the workers apply one entry per transaction.
//!
//! The plan compares each entry with the source of its key: absent → `add`;
//! the same as its latest revision (digest, title, provenance, revision,
//! required) → `noop`, unless that revision failed, which is submitted again
//! like a replace would; different → `replace`; a tombstone of a live key →
//! `delete` (with `prune` and `confirm` equal to its id), of an absent key →
//! `noop`. Keys not in the manifest are left alone.
//!
//! A run applies in plan order, each entry in one transaction that also moves
//! the checkpoint, so a crash resumes where it stopped and nothing is applied
//! twice. Each entry is evaluated again against the state at that moment. Runs
//! of one Agent apply one after another, oldest first: an applier always takes
//! the Agent's oldest unfinished run (its row locked), whichever run's job woke
//! it.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, PgPool};
use svc_contract::knowledge::{KnowledgeSource, PlanAction, PlanEntry, ReconcileRun, ReconcileStatus};
use svc_contract::operations::knowledge_source::{ManifestEntry, ReconcileInput};
use svc_contract::{Problem, ProblemCode};

use crate::entitlements::LimitKey;
use crate::error::{Error, Result};
use crate::ids::{AgentId, RunId, SourceId, WorkspaceId};
use crate::jobs::{Job, Queue};
use crate::knowledge::{self, Replaced, Scope};
use crate::store::knowledge::SourceRow;
use crate::store::reconcile::{EntryRow, NewEntry, RunRow};
use crate::store::types::{StoredReconcileStatus, StoredRevisionState, StoredWorkspaceStatus};
use crate::store::usage::Delta;
use crate::store::{self};

/// What a source's revisions weigh in `knowledge_bytes`: the active one, and
/// a candidate still to process.
fn held_bytes(source: &SourceRow) -> (i64, i64) {
    let unfinished = source.candidate_state.is_some_and(StoredRevisionState::is_unfinished);
    let candidate = if unfinished { source.candidate_bytes.unwrap_or(0) } else { 0 };
    (i64::from(source.active_bytes.unwrap_or(0)), i64::from(candidate))
}

/// A manifest planned against the sources as they are.
pub struct Plan {
    pub entries: Vec<PlanEntry>,
    /// The live sources the manifest names, by key.
    pub sources: HashMap<String, SourceRow>,
}

/// Plans `input` (see the module documentation): `invalid_request` for keys
/// named twice or a digest that is not its content's, `resource_not_found` for
/// the Agent, `limit_exceeded` when the whole manifest would pass a limit, and
/// `confirmation_required` (with every deletion in `details.deletions`) when a
/// deletion lacks `prune` or its exact `confirm`. Nothing is written.
pub async fn plan(conn: &mut PgConnection, scope: Scope<'_>, input: &ReconcileInput) -> Result<Plan> {
    let entries = &input.manifest.sources;
    let mut seen = HashSet::new();
    let twice: Vec<&str> = entries.iter().map(ManifestEntry::key).filter(|key| !seen.insert(*key)).collect();
    if !twice.is_empty() {
        return Err(Problem::invalid("duplicate_key", "A key may appear once in a manifest.")
            .with_detail("keys", twice)
            .into());
    }
    for (i, entry) in entries.iter().enumerate() {
        if let ManifestEntry::Upsert(upsert) = entry {
            let at = || format!("/manifest/sources/{i}/digest");
            upsert.submission.verify().map_err(|p| p.with_detail("path", at()))?;
        }
    }
    if store::agents::get(conn, scope.workspace, scope.agent).await?.is_none() {
        return Err(Problem::not_found("Agent").into());
    }
    let keys: Vec<String> = entries.iter().map(|e| e.key().to_owned()).collect();
    let sources: HashMap<String, SourceRow> =
        store::knowledge::by_keys(conn, scope.agent, &keys).await?.into_iter().map(|s| (s.key.clone(), s)).collect();

    let mut planned = Vec::with_capacity(entries.len());
    let mut delta = Delta::default();
    let mut deletions = Vec::new();
    let mut unconfirmed = false;
    for entry in entries {
        let current = sources.get(entry.key());
        let action = match (entry, current) {
            (ManifestEntry::Upsert(upsert), None) => {
                delta = delta.and(Delta::of(LimitKey::KnowledgeSources, 1));
                delta = delta.and(Delta::of(LimitKey::KnowledgeBytes, upsert.submission.bytes() as i64));
                PlanAction::Add
            }
            (ManifestEntry::Upsert(upsert), Some(source)) if knowledge::repeats(&upsert.submission, source.into()) => {
                PlanAction::Noop
            }
            (ManifestEntry::Upsert(upsert), Some(source)) => {
                let (_, superseded) = held_bytes(source);
                let bytes = upsert.submission.bytes() as i64;
                delta = delta.and(Delta::of(LimitKey::KnowledgeBytes, bytes - superseded));
                PlanAction::Replace
            }
            (ManifestEntry::Tombstone(tombstone), Some(source)) => {
                let (active, candidate) = held_bytes(source);
                delta = delta.and(Delta::of(LimitKey::KnowledgeSources, -1));
                delta = delta.and(Delta::of(LimitKey::KnowledgeBytes, -(active + candidate)));
                let id = source.id.to_string();
                unconfirmed |= !input.prune || tombstone.confirm.as_deref() != Some(id.as_str());
                deletions.push(json!({ "key": source.key, "sourceId": id }));
                PlanAction::Delete
            }
            (ManifestEntry::Tombstone(_), None) => PlanAction::Noop,
        };
        planned.push(PlanEntry { key: entry.key().to_owned(), source_id: current.map(|s| s.id.to_string()), action });
    }
    check_limits(conn, scope, &delta).await?;
    if unconfirmed {
        return Err(Problem::confirmation_required(
            "Deleting sources needs `prune: true` and each tombstone's `confirm` equal to its source id.",
        )
        .with_detail("deletions", Value::Array(deletions))
        .into());
    }
    Ok(Plan { entries: planned, sources })
}

/// `limit_exceeded` when the manifest as a whole would pass a limit.
async fn check_limits(conn: &mut PgConnection, scope: Scope<'_>, delta: &Delta) -> Result<()> {
    let usage = store::usage::get(conn, scope.workspace).await?;
    for key in [LimitKey::KnowledgeSources, LimitKey::KnowledgeBytes] {
        let wanted = delta.get(key);
        if wanted > 0 {
            scope.entitlement.check_limit(key, usage.get(key).max(0) as u64, wanted as u64)?;
        }
    }
    Ok(())
}

/// The answer to a reconcile call, and the job of an applied run.
pub struct Submitted {
    pub run: ReconcileRun,
    pub job: Option<Job>,
}

/// Plans `input` and, unless it is a dry run, stores the run with its entries'
/// content (in the caller's transaction, with its idempotency record). An
/// applied plan of noops only completes at once.
pub async fn submit(conn: &mut PgConnection, scope: Scope<'_>, input: &ReconcileInput) -> Result<Submitted> {
    let plan = plan(conn, scope, input).await?;
    let sources = |plan: &Plan| -> Vec<KnowledgeSource> {
        plan.entries.iter().filter_map(|e| plan.sources.get(&e.key)).map(|s| KnowledgeSource::from(s.clone())).collect()
    };
    if input.dry_run {
        let run = ReconcileRun {
            run_id: None,
            status: ReconcileStatus::Planned,
            dry_run: true,
            checkpoint: 0,
            error_code: None,
            knowledge_sources: sources(&plan),
            plan: plan.entries,
        };
        return Ok(Submitted { run, job: None });
    }
    let all_noop = plan.entries.iter().all(|e| e.action == PlanAction::Noop);
    let count = plan.entries.len() as i32;
    let row = RunRow {
        id: RunId::new(),
        workspace_id: scope.workspace,
        agent_id: scope.agent,
        status: if all_noop { StoredReconcileStatus::Completed } else { StoredReconcileStatus::Applying },
        checkpoint: if all_noop { count } else { 0 },
        entries: count,
        error_code: None,
    };
    let stored: Vec<NewEntry<'_>> =
        input.manifest.sources.iter().zip(&plan.entries).map(|(entry, planned)| new_entry(entry, planned)).collect();
    store::reconcile::insert(conn, &row, &stored).await?;
    let run = ReconcileRun {
        run_id: Some(row.id.to_string()),
        status: row.status.into(),
        dry_run: false,
        checkpoint: row.checkpoint as u64,
        error_code: None,
        knowledge_sources: sources(&plan),
        plan: plan.entries,
    };
    Ok(Submitted { run, job: (!all_noop).then_some(Job::ApplyReconcile { run: row.id }) })
}

fn new_entry<'a>(entry: &'a ManifestEntry, planned: &PlanEntry) -> NewEntry<'a> {
    let source_id = planned.source_id.as_deref().and_then(SourceId::parse);
    match entry {
        ManifestEntry::Tombstone(tombstone) => NewEntry {
            key: &tombstone.key,
            action: planned.action.into(),
            source_id,
            tombstone: true,
            confirm: tombstone.confirm.as_deref(),
            title: None,
            provenance_kind: None,
            provenance_uri: None,
            revision: None,
            digest: None,
            required: None,
            content: None,
        },
        ManifestEntry::Upsert(upsert) => NewEntry {
            key: &upsert.key,
            action: planned.action.into(),
            source_id,
            tombstone: false,
            confirm: None,
            title: Some(&upsert.submission.title),
            provenance_kind: Some(upsert.submission.provenance.kind.into()),
            provenance_uri: Some(&upsert.submission.provenance.uri),
            revision: Some(&upsert.submission.revision),
            digest: Some(&upsert.submission.digest),
            required: Some(upsert.submission.required),
            content: Some(&upsert.submission.content),
        },
    }
}

/// A stored run as it stands now: its status, checkpoint and the current state
/// of the sources it names (what a replay of its request answers).
pub async fn view(conn: &mut PgConnection, workspace: WorkspaceId, run: RunId) -> Result<ReconcileRun> {
    let row = store::reconcile::get(conn, workspace, run).await?.ok_or_else(|| Problem::not_found("reconcile run"))?;
    let planned = store::reconcile::plan(conn, run).await?;
    let keys: Vec<String> = planned.iter().map(|p| p.key.clone()).collect();
    let sources: HashMap<String, SourceRow> =
        store::knowledge::by_keys(conn, row.agent_id, &keys).await?.into_iter().map(|s| (s.key.clone(), s)).collect();
    let knowledge_sources =
        planned.iter().filter_map(|p| sources.get(&p.key)).map(|s| KnowledgeSource::from(s.clone())).collect();
    let plan = planned
        .into_iter()
        .map(|p| PlanEntry {
            key: p.key,
            // An add shows the source it made once applied.
            source_id: p.applied_source_id.or(p.source_id).map(|s| s.to_string()),
            action: p.action.into(),
        })
        .collect();
    Ok(ReconcileRun {
        run_id: Some(row.id.to_string()),
        status: row.status.into(),
        dry_run: false,
        checkpoint: row.checkpoint.max(0) as u64,
        error_code: row.error_code,
        plan,
        knowledge_sources,
    })
}

/// What applying found to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Every run of the Agent is finished (this one included).
    Done,
    /// The run's Agent has nothing applying (the job came late).
    Nothing,
    /// `entries` were applied and more are left: send the job again, so that
    /// a large manifest takes turns with other work instead of holding a
    /// worker's slot until it is done.
    More,
}

/// Applies the runs of `run`'s Agent, oldest first, entry by entry, until none
/// is left applying or `entries` were applied. Jobs for the revisions entries
/// create are pushed after each entry's commit. An `Err` is transient: the
/// sweeper sends the job again.
pub async fn apply(pool: &PgPool, run: RunId, queue: Option<&Queue>, entries: usize) -> Result<Applied> {
    let agent = {
        let mut conn = crate::runtime::connection(pool).await?;
        store::reconcile::agent_of(&mut conn, run).await?
    };
    let Some(agent) = agent else { return Ok(Applied::Nothing) };
    let mut applied_any = false;
    for _ in 0..entries.max(1) {
        match step(pool, agent).await? {
            Step::Idle => return Ok(if applied_any { Applied::Done } else { Applied::Nothing }),
            Step::Applied(job) => {
                applied_any = true;
                if let (Some(queue), Some(job)) = (queue, job)
                    && let Err(error) = queue.send(&[job]).await
                {
                    tracing::warn!(%error, "could not enqueue; the sweeper will");
                }
            }
            Step::Failed => applied_any = true,
        }
    }
    Ok(Applied::More)
}

enum Step {
    Idle,
    Applied(Option<Job>),
    Failed,
}

/// Applies the next entry of the Agent's oldest run in one transaction. The run
/// row is locked first (only appliers lock run rows), then the Workspace, its
/// sources, and its usage row last, in the store's order.
async fn step(pool: &PgPool, agent: AgentId) -> Result<Step> {
    let mut conn = crate::runtime::connection(pool).await?;
    let mut tx = conn.begin().await?;
    let Some(run) = store::reconcile::next_of_agent(&mut tx, agent).await? else {
        tx.rollback().await?;
        return Ok(Step::Idle);
    };
    let result = apply_next(&mut tx, &run).await;
    match result {
        Ok(job) => {
            tx.commit().await?;
            Ok(Step::Applied(job))
        }
        // A refusal fails the run; a busy or unavailable answer is retried
        // (the job's backoff, then the sweeper): it says nothing of the entry.
        Err(Error::Problem(problem)) if !problem.unavailable => {
            tx.rollback().await?;
            let mut tx = conn.begin().await?;
            store::reconcile::fail(&mut tx, run.id, failure_code(&problem)).await?;
            tx.commit().await?;
            tracing::info!(run = %run.id, code = %problem.code, "reconcile run failed");
            Ok(Step::Failed)
        }
        Err(error) => {
            let _ = tx.rollback().await;
            Err(error)
        }
    }
}

async fn apply_next(tx: &mut PgConnection, run: &RunRow) -> Result<Option<Job>> {
    let held = store::workspaces::hold(tx, run.workspace_id).await?;
    if held.status == StoredWorkspaceStatus::Archived {
        return Err(crate::entitlements::workspace_archived().into());
    }
    let now = time::OffsetDateTime::now_utc();
    if !held.entitlement.is_active(now) {
        return Err(crate::entitlements::entitlement_required(&held.entitlement, now).into());
    }
    let entry = store::reconcile::entry(tx, run.id, run.checkpoint)
        .await?
        .ok_or_else(|| Error::internal(format!("run {} has no entry {}", run.id, run.checkpoint)))?;
    let scope = Scope { workspace: run.workspace_id, agent: run.agent_id, entitlement: &held.entitlement };
    let (action, source, job) = apply_entry(tx, scope, entry).await?;
    if !store::reconcile::advance(tx, run.id, run.checkpoint, action.into(), source).await? {
        return Err(Error::internal(format!("run {} moved under its lock", run.id)));
    }
    Ok(job)
}

/// Applies one entry against the state now.
async fn apply_entry(
    tx: &mut PgConnection,
    scope: Scope<'_>,
    entry: EntryRow,
) -> Result<(PlanAction, Option<SourceId>, Option<Job>)> {
    let current = store::knowledge::by_keys(tx, scope.agent, std::slice::from_ref(&entry.key)).await?.pop();
    if entry.tombstone {
        return Ok(match current {
            // The key may name another source than the one confirmed: left alone.
            Some(source) if entry.confirm.as_deref() == Some(source.id.to_string().as_str()) => {
                knowledge::delete(tx, scope, source.id).await?;
                (PlanAction::Delete, Some(source.id), None)
            }
            other => (PlanAction::Noop, other.map(|s| s.id), None),
        });
    }
    let key = entry.key.clone();
    let submission = entry.into_submission().ok_or_else(|| Error::internal("upsert entry without its fields"))?;
    match current {
        None => {
            // Admitted already, under the run's hold (`apply_next`).
            let (source, job) =
                knowledge::add(tx, scope, &key, &submission, knowledge::NewIds::fresh(), |_| Ok(())).await?;
            Ok((PlanAction::Add, Some(source.id), Some(job)))
        }
        Some(source) if knowledge::repeats(&submission, (&source).into()) => {
            Ok((PlanAction::Noop, Some(source.id), None))
        }
        Some(source) => match knowledge::replace(tx, scope, source.id, &submission).await? {
            Replaced::Candidate(job) => Ok((PlanAction::Replace, Some(source.id), Some(job))),
            Replaced::Unchanged => Ok((PlanAction::Noop, Some(source.id), None)),
        },
    }
}

/// The code a run fails with for a problem met while applying it.
pub fn failure_code(problem: &Problem) -> &'static str {
    match problem.code {
        ProblemCode::InternalError => "internal",
        code => code.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::apply;
    use crate::runtime::sizes::{future_of_1, future_of_4};

    /// A worker's apply job is moved whole as apalis, backon and tokio wrap,
    /// spawn and poll it: it holds none of sqlx's acquire future (see the
    /// same test of processing's jobs in `knowledge::process`).
    #[test]
    #[cfg_attr(debug_assertions, ignore = "sizes of unoptimized futures; run with --release")]
    #[allow(clippy::disallowed_methods, reason = "its size, not a call")]
    fn an_apply_jobs_future_is_smaller_than_sqlxs_acquire() {
        let (acquire, apply) = (future_of_1(PgPool::acquire), future_of_4(apply));
        assert!(apply < acquire, "reconcile::apply: {apply} bytes, acquire {acquire}");
    }
}
