//! Reconcile runs and their entries.

use sqlx::PgConnection;
use svc_contract::knowledge::Provenance;
use svc_contract::operations::knowledge_source::Submission;

use super::types::{StoredPlanAction, StoredProvenanceKind, StoredReconcileStatus};
use crate::ids::{AgentId, RunId, SourceId, WorkspaceId};

/// A run as its answer shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub id: RunId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub status: StoredReconcileStatus,
    pub checkpoint: i32,
    pub entries: i32,
    pub error_code: Option<String>,
}

/// An entry's plan, and what applying it did.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRow {
    pub key: String,
    pub action: StoredPlanAction,
    pub source_id: Option<SourceId>,
    pub applied_action: Option<StoredPlanAction>,
    pub applied_source_id: Option<SourceId>,
}

/// An entry to store with its run.
pub struct NewEntry<'a> {
    pub key: &'a str,
    pub action: StoredPlanAction,
    pub source_id: Option<SourceId>,
    pub tombstone: bool,
    pub confirm: Option<&'a str>,
    pub title: Option<&'a str>,
    pub provenance_kind: Option<StoredProvenanceKind>,
    pub provenance_uri: Option<&'a str>,
    pub revision: Option<&'a str>,
    pub digest: Option<&'a str>,
    pub required: Option<bool>,
    pub content: Option<&'a str>,
}

/// Stores a run and its entries, in plan order.
#[tracing::instrument(level = "debug", skip(conn, entries), fields(entries = entries.len()))]
pub async fn insert(conn: &mut PgConnection, run: &RunRow, entries: &[NewEntry<'_>]) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO reconcile_runs (id, workspace_id, agent_id, status, checkpoint, entries)
        VALUES ($1, $2, $3, $4, $5, $6)
        "#,
        run.id as RunId,
        run.workspace_id as WorkspaceId,
        run.agent_id as AgentId,
        run.status as StoredReconcileStatus,
        run.checkpoint,
        run.entries,
    )
    .execute(&mut *conn)
    .await?;
    for (ordinal, entry) in entries.iter().enumerate() {
        sqlx::query!(
            r#"
            INSERT INTO reconcile_entries (run_id, ordinal, key, action, source_id, tombstone, confirm, title,
                                           provenance_kind, provenance_uri, revision, digest, required, content)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
            "#,
            run.id as RunId,
            ordinal as i32,
            entry.key,
            entry.action as StoredPlanAction,
            entry.source_id.map(|s| s.0),
            entry.tombstone,
            entry.confirm,
            entry.title,
            entry.provenance_kind as Option<StoredProvenanceKind>,
            entry.provenance_uri,
            entry.revision,
            entry.digest,
            entry.required,
            entry.content,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId, id: RunId) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as!(
        RunRow,
        r#"
        SELECT id AS "id: RunId", workspace_id AS "workspace_id: WorkspaceId", agent_id AS "agent_id: AgentId",
               status AS "status: StoredReconcileStatus", checkpoint, entries, error_code
        FROM reconcile_runs WHERE id = $1 AND workspace_id = $2
        "#,
        id as RunId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await
}

/// The plan of a run, in order.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn plan(conn: &mut PgConnection, run: RunId) -> sqlx::Result<Vec<PlannedRow>> {
    sqlx::query_as!(
        PlannedRow,
        r#"
        SELECT key, action AS "action: StoredPlanAction", source_id AS "source_id: SourceId",
               applied_action AS "applied_action: StoredPlanAction", applied_source_id AS "applied_source_id: SourceId"
        FROM reconcile_entries WHERE run_id = $1 ORDER BY ordinal
        "#,
        run as RunId,
    )
    .fetch_all(conn)
    .await
}

/// The Agent's oldest run still applying, locked until the transaction ends:
/// the only run of the Agent anyone applies, so runs apply in submission order.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn next_of_agent(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as!(
        RunRow,
        r#"
        SELECT id AS "id: RunId", workspace_id AS "workspace_id: WorkspaceId", agent_id AS "agent_id: AgentId",
               status AS "status: StoredReconcileStatus", checkpoint, entries, error_code
        FROM reconcile_runs WHERE agent_id = $1 AND status = 'applying'
        ORDER BY id LIMIT 1
        FOR UPDATE
        "#,
        agent as AgentId,
    )
    .fetch_optional(conn)
    .await
}

/// The Agent of a run.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn agent_of(conn: &mut PgConnection, run: RunId) -> sqlx::Result<Option<AgentId>> {
    sqlx::query_scalar!(r#"SELECT agent_id AS "agent_id: AgentId" FROM reconcile_runs WHERE id = $1"#, run as RunId)
        .fetch_optional(conn)
        .await
}

/// One entry with everything needed to apply it.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryRow {
    pub key: String,
    pub action: StoredPlanAction,
    pub tombstone: bool,
    pub confirm: Option<String>,
    pub title: Option<String>,
    pub provenance_kind: Option<StoredProvenanceKind>,
    pub provenance_uri: Option<String>,
    pub revision: Option<String>,
    pub digest: Option<String>,
    pub required: Option<bool>,
    pub content: Option<String>,
}

impl EntryRow {
    /// The submission an upsert entry was stored with; `None` for a
    /// tombstone (or an upsert missing a field, which no insert writes).
    pub fn into_submission(self) -> Option<Submission> {
        Some(Submission {
            title: self.title?,
            provenance: Provenance { kind: self.provenance_kind?.into(), uri: self.provenance_uri? },
            revision: self.revision?,
            digest: self.digest?,
            required: self.required?,
            content: self.content?,
        })
    }
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn entry(conn: &mut PgConnection, run: RunId, ordinal: i32) -> sqlx::Result<Option<EntryRow>> {
    sqlx::query_as!(
        EntryRow,
        r#"
        SELECT key, action AS "action: StoredPlanAction", tombstone, confirm, title,
               provenance_kind AS "provenance_kind: StoredProvenanceKind", provenance_uri, revision, digest,
               required, content
        FROM reconcile_entries WHERE run_id = $1 AND ordinal = $2
        "#,
        run as RunId,
        ordinal,
    )
    .fetch_optional(conn)
    .await
}

/// Records entry `ordinal` as applied and moves the checkpoint past it (the run
/// completes with its last entry); `false` when the checkpoint was elsewhere.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn advance(
    conn: &mut PgConnection,
    run: RunId,
    ordinal: i32,
    applied: StoredPlanAction,
    source: Option<SourceId>,
) -> sqlx::Result<bool> {
    let moved = sqlx::query!(
        r#"
        UPDATE reconcile_runs
        SET checkpoint = checkpoint + 1, updated_at = now(),
            status = CASE WHEN checkpoint + 1 = entries THEN 'completed'::reconcile_status ELSE status END
        WHERE id = $1 AND checkpoint = $2 AND status = 'applying'
        "#,
        run as RunId,
        ordinal,
    )
    .execute(&mut *conn)
    .await?;
    if moved.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query!(
        r#"
        UPDATE reconcile_entries SET applied_action = $3, applied_source_id = $4, content = NULL
        WHERE run_id = $1 AND ordinal = $2
        "#,
        run as RunId,
        ordinal,
        applied as StoredPlanAction,
        source.map(|s| s.0),
    )
    .execute(conn)
    .await?;
    Ok(true)
}

/// Ends a run `failed` with `error_code`; its remaining entries' content is dropped.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn fail(conn: &mut PgConnection, run: RunId, error_code: &str) -> sqlx::Result<bool> {
    let failed = sqlx::query!(
        r#"UPDATE reconcile_runs SET status = 'failed', error_code = $2, updated_at = now()
           WHERE id = $1 AND status = 'applying'"#,
        run as RunId,
        error_code,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("UPDATE reconcile_entries SET content = NULL WHERE run_id = $1", run as RunId).execute(conn).await?;
    Ok(failed.rows_affected() == 1)
}

/// Runs still applying without progress for `after_secs` whose last job is as
/// old, marked as sent again now.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn take_stale(conn: &mut PgConnection, after_secs: f64, limit: i64) -> sqlx::Result<Vec<RunId>> {
    sqlx::query_scalar!(
        r#"
        UPDATE reconcile_runs SET enqueued_at = now()
        WHERE id IN (
            SELECT id FROM reconcile_runs
            WHERE status = 'applying'
              AND updated_at < now() - make_interval(secs => $1)
              AND enqueued_at < now() - make_interval(secs => $1)
            ORDER BY id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        )
        RETURNING id AS "id: RunId"
        "#,
        after_secs,
        limit,
    )
    .fetch_all(conn)
    .await
}
