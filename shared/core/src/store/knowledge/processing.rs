//! What workers do with revisions: attempts and their leases, promotion, and
//! the sweeper's view of unfinished work.

use sqlx::PgConnection;

use crate::ids::{AgentId, RevisionId, SourceId, WorkspaceId};
use crate::store::types::{StoredLanguage, StoredRevisionState};

/// A revision as a worker finds it, locked.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub workspace: WorkspaceId,
    pub state: StoredRevisionState,
    pub attempts: i32,
    /// An attempt holds a lease that has not run out: another process's, or
    /// another job slot's of this one (a duplicate job), whoever's name it bears.
    pub leased: bool,
    /// It was imported longer ago than the processing deadline.
    pub overdue: bool,
}

/// Locks the source of a revision (live or not) until the transaction ends,
/// before a change to the revision that the source shows: the store's lock
/// order is the source, then its revisions (and the usage row last).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock_source_of(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        SELECT s.id FROM knowledge_sources s JOIN knowledge_revisions r ON r.source_id = s.id
        WHERE r.id = $1
        FOR NO KEY UPDATE OF s
        "#,
        revision as RevisionId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(())
}

/// [`lock_source_of`] unless another transaction holds the source: `false`
/// then (and when the revision is gone), without waiting.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn try_lock_source_of(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<bool> {
    let locked = sqlx::query!(
        r#"
        SELECT s.id FROM knowledge_sources s JOIN knowledge_revisions r ON r.source_id = s.id
        WHERE r.id = $1
        FOR NO KEY UPDATE OF s SKIP LOCKED
        "#,
        revision as RevisionId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(locked.is_some())
}

/// Reads and locks a revision a worker was asked to process; the caller holds
/// its source ([`lock_source_of`]). The lock (NO KEY UPDATE) lets another
/// attempt's promotion keep the revision's key while it waits for the source:
/// a FOR UPDATE here would wait on that promotion while holding the source it
/// waits for.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock_job(conn: &mut PgConnection, revision: RevisionId, deadline_secs: f64) -> sqlx::Result<Option<Job>> {
    sqlx::query_as!(
        Job,
        r#"
        SELECT workspace_id AS "workspace: WorkspaceId", state AS "state: StoredRevisionState", attempts,
               coalesce(lease_until > now(), false) AS "leased!",
               imported_at < now() - make_interval(secs => $2) AS "overdue!"
        FROM knowledge_revisions WHERE id = $1
        FOR NO KEY UPDATE
        "#,
        revision as RevisionId,
        deadline_secs,
    )
    .fetch_optional(conn)
    .await
}

/// Starts an attempt on an unfinished revision: `processing` (and so shown by
/// its source, whose row the caller holds), counted, and leased to `owner` for
/// `lease_secs`; `false` when the revision is not unfinished.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn start_attempt(
    conn: &mut PgConnection,
    revision: RevisionId,
    owner: &str,
    lease_secs: f64,
) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"
        WITH started AS (
            UPDATE knowledge_revisions
            SET state = 'processing', attempts = attempts + 1, lease_owner = $2,
                lease_until = now() + make_interval(secs => $3)
            WHERE id = $1 AND state IN ('pending', 'processing')
            RETURNING source_id
        ), shown AS (
            UPDATE knowledge_sources s SET candidate_state = 'processing'
            FROM started WHERE s.id = started.source_id AND s.candidate_revision_id = $1
        )
        SELECT count(*) AS "started!" FROM started
        "#,
        revision as RevisionId,
        owner,
        lease_secs,
    )
    .fetch_one(conn)
    .await
    .map(|started| started == 1)
}

/// Extends `owner`'s lease; `false` when it no longer holds one.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn renew_lease(
    conn: &mut PgConnection,
    revision: RevisionId,
    worker: &str,
    lease_secs: f64,
) -> sqlx::Result<bool> {
    let renewed = sqlx::query!(
        r#"
        UPDATE knowledge_revisions SET lease_until = now() + make_interval(secs => $3)
        WHERE id = $1 AND lease_owner = $2 AND state = 'processing'
        "#,
        revision as RevisionId,
        worker,
        lease_secs,
    )
    .execute(conn)
    .await?;
    Ok(renewed.rows_affected() == 1)
}

/// Gives `owner`'s lease up at once (after an attempt that did not finish), so
/// the next job for the revision need not wait for it to run out. With
/// `give_back`, the attempt no longer counts towards the limit: it was cut
/// short by the infrastructure (contention, a lost connection), not by the
/// content. Nothing happens once another attempt holds the revision.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn release_lease(
    conn: &mut PgConnection,
    revision: RevisionId,
    owner: &str,
    give_back: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        UPDATE knowledge_revisions
        SET lease_until = now(), attempts = attempts - CASE WHEN $3 AND attempts > 0 THEN 1 ELSE 0 END
        WHERE id = $1 AND lease_owner = $2 AND state = 'processing'
        "#,
        revision as RevisionId,
        owner,
        give_back,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// What processing reads of a revision.
#[derive(Clone, Debug, PartialEq)]
pub struct Material {
    pub source_id: SourceId,
    pub agent_id: AgentId,
    pub workspace_id: WorkspaceId,
    pub title: String,
    pub digest: String,
    pub content: Option<String>,
    /// The Agent's language now: the passages are indexed in it.
    pub language: StoredLanguage,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn material(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<Option<Material>> {
    sqlx::query_as!(
        Material,
        r#"
        SELECT r.source_id AS "source_id: SourceId", r.agent_id AS "agent_id: AgentId",
               r.workspace_id AS "workspace_id: WorkspaceId", r.title, r.digest, r.content,
               a.default_language AS "language: StoredLanguage"
        FROM knowledge_revisions r JOIN agents a ON a.id = r.agent_id
        WHERE r.id = $1
        "#,
        revision as RevisionId,
    )
    .fetch_optional(conn)
    .await
}

/// The source's active revision now (read without a lock).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn active_of(conn: &mut PgConnection, source: SourceId) -> sqlx::Result<Option<Option<RevisionId>>> {
    sqlx::query_scalar!(
        r#"SELECT active_revision_id AS "active: RevisionId" FROM knowledge_sources WHERE id = $1 AND deleted_at IS NULL"#,
        source as SourceId,
    )
    .fetch_optional(conn)
    .await
}

/// Makes `revision` the source's active revision if it is still the candidate
/// and `previous` still the active one (compare-and-set); `false` otherwise.
/// The source shows the candidate's fields as the active revision's.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn promote(
    conn: &mut PgConnection,
    source: SourceId,
    revision: RevisionId,
    previous: Option<RevisionId>,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"
        UPDATE knowledge_sources
        SET active_revision_id = $2, active_revision = candidate_revision, active_digest = candidate_digest,
            active_imported_at = candidate_imported_at, active_bytes = candidate_bytes,
            candidate_revision_id = NULL, candidate_revision = NULL, candidate_digest = NULL,
            candidate_state = NULL, candidate_imported_at = NULL, candidate_error_code = NULL, candidate_bytes = NULL
        WHERE id = $1 AND candidate_revision_id = $2 AND active_revision_id IS NOT DISTINCT FROM $3
          AND deleted_at IS NULL
        "#,
        source as SourceId,
        revision as RevisionId,
        previous.map(|p| p.0),
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks a processed revision active with its index sizes, if `worker` still
/// holds it; `false` otherwise.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn activate(
    conn: &mut PgConnection,
    revision: RevisionId,
    worker: &str,
    language: StoredLanguage,
    passages: i64,
    tokens: i64,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"
        UPDATE knowledge_revisions
        SET state = 'active', language = $3, passages = $4, tokens = $5, lease_owner = NULL, lease_until = NULL
        WHERE id = $1 AND state = 'processing' AND lease_owner = $2
        "#,
        revision as RevisionId,
        worker,
        language as StoredLanguage,
        i32::try_from(passages).unwrap_or(i32::MAX),
        tokens,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Unfinished revisions imported longer ago than the deadline.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn overdue(conn: &mut PgConnection, deadline_secs: f64, limit: i64) -> sqlx::Result<Vec<RevisionId>> {
    sqlx::query_scalar!(
        r#"
        SELECT id AS "id: RevisionId" FROM knowledge_revisions
        WHERE state IN ('pending', 'processing') AND imported_at < now() - make_interval(secs => $1)
        ORDER BY imported_at
        LIMIT $2
        "#,
        deadline_secs,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Work still to be processed, as `/metrics` and `retryAfterMs` show it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PendingWork {
    /// Revisions pending or processing.
    pub revisions: i64,
    /// Workspaces with any of them.
    pub workspaces: i64,
    /// How long the oldest has waited, in seconds (0 when none).
    pub oldest_secs: f64,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn backlog(conn: &mut PgConnection) -> sqlx::Result<PendingWork> {
    sqlx::query_as!(
        PendingWork,
        r#"
        SELECT count(*) AS "revisions!", count(DISTINCT workspace_id) AS "workspaces!",
               coalesce(extract(epoch FROM now() - min(imported_at))::float8, 0) AS "oldest_secs!"
        FROM knowledge_revisions WHERE state IN ('pending', 'processing')
        "#
    )
    .fetch_one(conn)
    .await
}

/// The Workspace of a revision.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn workspace_of(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<Option<WorkspaceId>> {
    sqlx::query_scalar!(
        r#"SELECT workspace_id AS "workspace_id: WorkspaceId" FROM knowledge_revisions WHERE id = $1"#,
        revision as RevisionId,
    )
    .fetch_optional(conn)
    .await
}
