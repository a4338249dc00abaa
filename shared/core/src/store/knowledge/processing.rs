//! What workers do with revisions: attempts and their leases, promotion, and
//! the sweeper's view of unfinished work.

use sqlx::PgConnection;

use crate::ids::{AgentId, RevisionId, SourceId, WorkspaceId};
use crate::store::types::StoredLanguage;

/// Why a claim started no attempt on a revision it found. The claim's SQL
/// decides, in this order, and starts an attempt only when none applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It is finished, or an attempt holds a lease that has not run out:
    /// another process's, or another job slot's of this one (a duplicate
    /// job), whoever's name it bears.
    Held,
    /// It was imported longer ago than the processing deadline.
    Overdue,
    /// It has had every attempt it may have.
    OutOfAttempts,
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

/// What a claim asks for (see [`claim`]).
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// The attempt's name: its lease is held under it.
    pub owner: &'a str,
    pub lease_secs: f64,
    /// Age past which an unfinished revision is overdue.
    pub deadline_secs: f64,
    /// Attempts a revision may have had and still get another.
    pub max_attempts: i32,
    /// Wait for a source another transaction holds, rather than skip it.
    pub wait: bool,
}

/// What a claim found.
#[derive(Clone, Debug, PartialEq)]
pub enum Claimed {
    /// The attempt started: the revision is `processing` (shown by its
    /// source), counted and leased, and its Workspace went to the back of the
    /// turn. What processing reads of it.
    Started(Material),
    /// No attempt started, and why.
    NotStarted(Refusal),
}

/// Starts an attempt on `revision` in one statement (one round trip; its own
/// transaction unless the connection is in one). Locks its source first (the
/// store's lock order: the source, then its revisions), without waiting
/// unless `claim.wait`, so jobs claiming at the same moment spread over the
/// candidates; then the revision. Starts the attempt only on an unfinished
/// revision that no live lease holds, neither overdue nor out of attempts.
/// `None` when the revision is gone or, without `wait`, its source is held.
///
/// The source is locked by `job`'s uncorrelated `EXISTS`, which PostgreSQL
/// evaluates once, before it reads the revision. The revision's lock (NO KEY
/// UPDATE) lets another attempt's promotion keep the revision's key while it
/// waits for the source.
///
/// The statement reads with the snapshot it started with, before any wait
/// for the source: a claim that waited may miss a turn's row another attempt
/// of the Workspace made meanwhile (its first), and then leaves the stamp to
/// that one, a moment apart; the row locks themselves (source, revision) are
/// taken on the latest versions.
///
/// The Workspace goes to the back of the turn, unless another attempt of the
/// same Workspace is starting right now and holds its turn's row: that one
/// moves it to the back as well, a moment apart, and waiting for it would
/// make the attempts of one Workspace start one at a time.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn claim(conn: &mut PgConnection, revision: RevisionId, claim: &Claim<'_>) -> sqlx::Result<Option<Claimed>> {
    let row = sqlx::query!(
        r#"
        WITH waited AS (
            SELECT s.id FROM knowledge_sources s
            WHERE $6 AND s.id = (SELECT source_id FROM knowledge_revisions WHERE id = $1)
            FOR NO KEY UPDATE
        ), unheld AS (
            SELECT s.id FROM knowledge_sources s
            WHERE NOT $6 AND s.id = (SELECT source_id FROM knowledge_revisions WHERE id = $1)
            FOR NO KEY UPDATE SKIP LOCKED
        ), job AS (
            SELECT id, workspace_id,
                   CASE WHEN state NOT IN ('pending', 'processing') OR coalesce(lease_until > now(), false)
                          THEN 'held'
                        WHEN imported_at < now() - make_interval(secs => $4) THEN 'overdue'
                        WHEN attempts >= $5 THEN 'out_of_attempts'
                   END AS refusal
            FROM knowledge_revisions
            WHERE id = $1 AND (EXISTS (SELECT 1 FROM waited) OR EXISTS (SELECT 1 FROM unheld))
            FOR NO KEY UPDATE
        ), started AS (
            UPDATE knowledge_revisions r
            SET state = 'processing', attempts = r.attempts + 1, lease_owner = $2,
                lease_until = now() + make_interval(secs => $3)
            FROM job
            WHERE r.id = job.id AND job.refusal IS NULL
            RETURNING r.source_id, r.agent_id, r.workspace_id, r.title, r.digest, r.content
        ), shown AS (
            UPDATE knowledge_sources s SET candidate_state = 'processing'
            FROM started WHERE s.id = started.source_id AND s.candidate_revision_id = $1
        ), turn AS (
            SELECT t.workspace_id FROM workspace_turns t JOIN started USING (workspace_id)
            FOR UPDATE OF t SKIP LOCKED
        ), moved AS (
            UPDATE workspace_turns t SET served_at = clock_timestamp()
            FROM turn WHERE t.workspace_id = turn.workspace_id
        ), first AS (
            INSERT INTO workspace_turns (workspace_id, served_at)
            SELECT workspace_id, clock_timestamp() FROM started
            WHERE NOT EXISTS (SELECT 1 FROM workspace_turns t WHERE t.workspace_id = started.workspace_id)
            ON CONFLICT (workspace_id) DO NOTHING
        )
        SELECT job.workspace_id AS "workspace: WorkspaceId", job.refusal,
               started.source_id AS "source_id?: SourceId", started.agent_id AS "agent_id?: AgentId",
               started.title AS "title?", started.digest AS "digest?", started.content,
               a.default_language AS "language?: StoredLanguage"
        FROM job
        LEFT JOIN started ON true
        LEFT JOIN agents a ON a.id = started.agent_id
        "#,
        revision as RevisionId,
        claim.owner,
        claim.lease_secs,
        claim.deadline_secs,
        claim.max_attempts,
        claim.wait,
    )
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    if let (Some(source_id), Some(agent_id), Some(title), Some(digest), Some(language)) =
        (row.source_id, row.agent_id, row.title, row.digest, row.language)
    {
        return Ok(Some(Claimed::Started(Material {
            source_id,
            agent_id,
            workspace_id: row.workspace,
            title,
            digest,
            content: row.content,
            language,
        })));
    }
    let refusal = match row.refusal.as_deref() {
        Some("held") => Refusal::Held,
        Some("overdue") => Refusal::Overdue,
        Some("out_of_attempts") => Refusal::OutOfAttempts,
        other => {
            let unknown = format!("revision {revision}: no attempt started, refusal {other:?}");
            return Err(sqlx::Error::Decode(unknown.into()));
        }
    };
    Ok(Some(Claimed::NotStarted(refusal)))
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
/// short by the infrastructure (contention, a lost connection, its own
/// process), not by the content. Nothing happens once another attempt holds
/// the revision, or it finished: `false` then.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn release_lease(
    conn: &mut PgConnection,
    revision: RevisionId,
    owner: &str,
    give_back: bool,
) -> sqlx::Result<bool> {
    let released = sqlx::query!(
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
    Ok(released.rows_affected() == 1)
}

/// Whether `owner`'s attempt promoted `revision` (an active revision keeps the
/// name of the attempt that promoted it).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn promoted_by(conn: &mut PgConnection, revision: RevisionId, owner: &str) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM knowledge_revisions WHERE id = $1 AND lease_owner = $2 AND state = 'active') AS "promoted!""#,
        revision as RevisionId,
        owner,
    )
    .fetch_one(conn)
    .await
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

/// What [`promote`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promoted {
    /// The revision is the source's active one now; `previous` was.
    Done { previous: Option<RevisionId> },
    /// The source's candidate is another revision now (or the source is gone).
    Superseded,
    /// `owner` no longer holds the revision.
    Lost,
}

/// What a promotion writes of a processed revision.
#[derive(Clone, Copy, Debug)]
pub struct Processed<'a> {
    pub source: SourceId,
    pub revision: RevisionId,
    /// The attempt that processed it.
    pub owner: &'a str,
    pub language: StoredLanguage,
    pub passages: i64,
    pub tokens: i64,
}

/// Makes the processed revision its source's active revision, in one
/// statement: if it is still the candidate and the active revision is still
/// the one this statement read (compare-and-set; the source shows the
/// candidate's fields as the active revision's), and if its attempt still
/// holds it (marked active with its index sizes). The revision is written
/// only once the source is (`FROM promoted`): the lock order, the source then
/// its revisions, follows from the data. `Lost` leaves the source written:
/// the caller rolls its transaction back.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn promote(conn: &mut PgConnection, processed: &Processed<'_>) -> sqlx::Result<Promoted> {
    let row = sqlx::query!(
        r#"
        WITH current AS (
            SELECT active_revision_id FROM knowledge_sources WHERE id = $1 AND deleted_at IS NULL
        ), promoted AS (
            UPDATE knowledge_sources s
            SET active_revision_id = $2, active_revision = candidate_revision, active_digest = candidate_digest,
                active_imported_at = candidate_imported_at, active_bytes = candidate_bytes,
                candidate_revision_id = NULL, candidate_revision = NULL, candidate_digest = NULL,
                candidate_state = NULL, candidate_imported_at = NULL, candidate_error_code = NULL,
                candidate_bytes = NULL
            FROM current
            WHERE s.id = $1 AND s.candidate_revision_id = $2
              AND s.active_revision_id IS NOT DISTINCT FROM current.active_revision_id AND s.deleted_at IS NULL
            RETURNING current.active_revision_id AS previous
        ), activated AS (
            UPDATE knowledge_revisions r
            SET state = 'active', language = $4, passages = $5, tokens = $6, lease_until = NULL
            FROM promoted
            WHERE r.id = $2 AND r.state = 'processing' AND r.lease_owner = $3
            RETURNING r.id
        )
        SELECT EXISTS (SELECT 1 FROM promoted) AS "promoted!",
               (SELECT previous FROM promoted) AS "previous: RevisionId",
               EXISTS (SELECT 1 FROM activated) AS "activated!"
        "#,
        processed.source as SourceId,
        processed.revision as RevisionId,
        processed.owner,
        processed.language as StoredLanguage,
        i32::try_from(processed.passages).unwrap_or(i32::MAX),
        processed.tokens,
    )
    .fetch_one(conn)
    .await?;
    Ok(match (row.promoted, row.activated) {
        (false, _) => Promoted::Superseded,
        (true, false) => Promoted::Lost,
        (true, true) => Promoted::Done { previous: row.previous },
    })
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
