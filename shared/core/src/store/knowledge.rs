//! Knowledge Sources, their revisions, passages and term statistics.

use futures_util::stream::BoxStream;
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::types::{StoredLanguage, StoredProvenanceKind, StoredRevisionState};
use crate::ids::{AgentId, RevisionId, SourceId, WorkspaceId};

/// A live source as the resource shows it: its latest, active and candidate
/// revisions (`knowledge_source_view`).
#[derive(Clone, Debug, PartialEq)]
pub struct SourceRow {
    pub id: SourceId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub key: String,
    pub revision: String,
    pub digest: String,
    pub title: String,
    pub provenance_kind: StoredProvenanceKind,
    pub provenance_uri: String,
    pub required: bool,
    pub imported_at: OffsetDateTime,
    pub active_id: Option<RevisionId>,
    pub active_revision: Option<String>,
    pub active_digest: Option<String>,
    pub active_state: Option<StoredRevisionState>,
    pub active_imported_at: Option<OffsetDateTime>,
    pub active_error_code: Option<String>,
    pub candidate_id: Option<RevisionId>,
    pub candidate_revision: Option<String>,
    pub candidate_digest: Option<String>,
    pub candidate_state: Option<StoredRevisionState>,
    pub candidate_imported_at: Option<OffsetDateTime>,
    pub candidate_error_code: Option<String>,
    pub latest_state: StoredRevisionState,
    pub active_bytes: Option<i32>,
    pub candidate_bytes: Option<i32>,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    agent: AgentId,
    id: SourceId,
) -> sqlx::Result<Option<SourceRow>> {
    sqlx::query_as!(
        SourceRow,
        r#"
        SELECT id AS "id!: SourceId", workspace_id AS "workspace_id!: WorkspaceId", agent_id AS "agent_id!: AgentId",
               key AS "key!", revision AS "revision!", digest AS "digest!", title AS "title!",
               provenance_kind AS "provenance_kind!: StoredProvenanceKind", provenance_uri AS "provenance_uri!",
               required AS "required!", imported_at AS "imported_at!",
               active_id AS "active_id?: RevisionId", active_revision, active_digest,
               active_state AS "active_state?: StoredRevisionState", active_imported_at, active_error_code,
               candidate_id AS "candidate_id?: RevisionId", candidate_revision, candidate_digest,
               candidate_state AS "candidate_state?: StoredRevisionState", candidate_imported_at, candidate_error_code,
               latest_state AS "latest_state!: StoredRevisionState", active_bytes, candidate_bytes
        FROM knowledge_source_view WHERE id = $1 AND workspace_id = $2 AND agent_id = $3
        "#,
        id as SourceId,
        workspace as WorkspaceId,
        agent as AgentId,
    )
    .fetch_optional(conn)
    .await
}

/// One page of an Agent's live sources, oldest first, after `after`.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list(
    conn: &mut PgConnection,
    agent: AgentId,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<SourceRow>> {
    sqlx::query_as!(
        SourceRow,
        r#"
        SELECT id AS "id!: SourceId", workspace_id AS "workspace_id!: WorkspaceId", agent_id AS "agent_id!: AgentId",
               key AS "key!", revision AS "revision!", digest AS "digest!", title AS "title!",
               provenance_kind AS "provenance_kind!: StoredProvenanceKind", provenance_uri AS "provenance_uri!",
               required AS "required!", imported_at AS "imported_at!",
               active_id AS "active_id?: RevisionId", active_revision, active_digest,
               active_state AS "active_state?: StoredRevisionState", active_imported_at, active_error_code,
               candidate_id AS "candidate_id?: RevisionId", candidate_revision, candidate_digest,
               candidate_state AS "candidate_state?: StoredRevisionState", candidate_imported_at, candidate_error_code,
               latest_state AS "latest_state!: StoredRevisionState", active_bytes, candidate_bytes
        FROM knowledge_source_view
        WHERE agent_id = $1 AND ($2::uuid IS NULL OR id > $2)
        ORDER BY id
        LIMIT $3
        "#,
        agent as AgentId,
        after,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// The Agent's live sources with these keys.
#[tracing::instrument(level = "debug", skip(conn, keys), fields(keys = keys.len()))]
pub async fn by_keys(conn: &mut PgConnection, agent: AgentId, keys: &[String]) -> sqlx::Result<Vec<SourceRow>> {
    sqlx::query_as!(
        SourceRow,
        r#"
        SELECT id AS "id!: SourceId", workspace_id AS "workspace_id!: WorkspaceId", agent_id AS "agent_id!: AgentId",
               key AS "key!", revision AS "revision!", digest AS "digest!", title AS "title!",
               provenance_kind AS "provenance_kind!: StoredProvenanceKind", provenance_uri AS "provenance_uri!",
               required AS "required!", imported_at AS "imported_at!",
               active_id AS "active_id?: RevisionId", active_revision, active_digest,
               active_state AS "active_state?: StoredRevisionState", active_imported_at, active_error_code,
               candidate_id AS "candidate_id?: RevisionId", candidate_revision, candidate_digest,
               candidate_state AS "candidate_state?: StoredRevisionState", candidate_imported_at, candidate_error_code,
               latest_state AS "latest_state!: StoredRevisionState", active_bytes, candidate_bytes
        FROM knowledge_source_view WHERE agent_id = $1 AND key = ANY($2)
        "#,
        agent as AgentId,
        keys,
    )
    .fetch_all(conn)
    .await
}

/// What a write needs to know of one revision.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionFacts {
    pub id: RevisionId,
    pub state: StoredRevisionState,
    pub revision: String,
    pub digest: String,
    pub title: String,
    pub provenance_kind: StoredProvenanceKind,
    pub provenance_uri: String,
    pub required: bool,
    pub content_bytes: i32,
}

/// A live source locked for a write, with its revisions.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldSource {
    pub id: SourceId,
    pub latest: RevisionFacts,
    pub active: Option<RevisionFacts>,
    pub candidate: Option<RevisionFacts>,
}

/// Locks a live source of the Agent until the transaction ends.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    agent: AgentId,
    id: SourceId,
) -> sqlx::Result<Option<HeldSource>> {
    let Some(source) = sqlx::query!(
        r#"
        SELECT latest_revision_id AS "latest: RevisionId", active_revision_id AS "active: RevisionId",
               candidate_revision_id AS "candidate: RevisionId"
        FROM knowledge_sources
        WHERE id = $1 AND workspace_id = $2 AND agent_id = $3 AND deleted_at IS NULL
        FOR UPDATE
        "#,
        id as SourceId,
        workspace as WorkspaceId,
        agent as AgentId,
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let ids: Vec<Uuid> =
        [Some(source.latest), source.active, source.candidate].into_iter().flatten().map(|i| i.0).collect();
    let facts = sqlx::query_as!(
        RevisionFacts,
        r#"
        SELECT id AS "id: RevisionId", state AS "state: StoredRevisionState", revision, digest, title,
               provenance_kind AS "provenance_kind: StoredProvenanceKind", provenance_uri, required, content_bytes
        FROM knowledge_revisions WHERE id = ANY($1)
        "#,
        &ids,
    )
    .fetch_all(conn)
    .await?;
    let find = |id: Option<RevisionId>| id.and_then(|id| facts.iter().find(|f| f.id == id).cloned());
    let Some(latest) = find(Some(source.latest)) else {
        return Err(sqlx::Error::RowNotFound);
    };
    Ok(Some(HeldSource { id, latest, active: find(source.active), candidate: find(source.candidate) }))
}

/// A new revision's fields.
pub struct NewRevision<'a> {
    pub id: RevisionId,
    pub source_id: SourceId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub revision: &'a str,
    pub digest: &'a str,
    pub title: &'a str,
    pub provenance_kind: StoredProvenanceKind,
    pub provenance_uri: &'a str,
    pub required: bool,
    pub content: &'a str,
}

impl NewRevision<'_> {
    /// The size the revision and its source record (in UTF-8, as limits count it).
    fn content_bytes(&self) -> i32 {
        i32::try_from(self.content.len()).unwrap_or(i32::MAX)
    }
}

#[tracing::instrument(level = "debug", skip(conn, new), fields(id = %new.id))]
pub async fn insert_revision(conn: &mut PgConnection, new: &NewRevision<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title,
                                         provenance_kind, provenance_uri, required, content, content_bytes)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
        "#,
        new.id as RevisionId,
        new.source_id as SourceId,
        new.workspace_id as WorkspaceId,
        new.agent_id as AgentId,
        new.revision,
        new.digest,
        new.title,
        new.provenance_kind as StoredProvenanceKind,
        new.provenance_uri,
        new.required,
        new.content,
        new.content_bytes(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Inserts the source of `first`, its first revision (inserted next, in the
/// same transaction), showing it as latest and candidate; `false` when a live
/// source of the Agent has the key.
#[tracing::instrument(level = "debug", skip(conn, first), fields(id = %first.source_id))]
pub async fn insert_source(conn: &mut PgConnection, key: &str, first: &NewRevision<'_>) -> sqlx::Result<bool> {
    // `now()` is the transaction's start: the revision's `imported_at` too.
    let inserted = sqlx::query!(
        r#"
        INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id, candidate_revision_id,
                                       revision, digest, title, provenance_kind, provenance_uri, required,
                                       imported_at, candidate_revision, candidate_digest, candidate_state,
                                       candidate_imported_at, candidate_bytes)
        VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, now(), $6, $7, 'pending', now(), $12)
        ON CONFLICT (agent_id, key) WHERE deleted_at IS NULL DO NOTHING
        "#,
        first.source_id as SourceId,
        first.workspace_id as WorkspaceId,
        first.agent_id as AgentId,
        key,
        first.id as RevisionId,
        first.revision,
        first.digest,
        first.title,
        first.provenance_kind as StoredProvenanceKind,
        first.provenance_uri,
        first.required,
        first.content_bytes(),
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The live source with this key, if any.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn id_by_key(conn: &mut PgConnection, agent: AgentId, key: &str) -> sqlx::Result<Option<SourceId>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id: SourceId" FROM knowledge_sources WHERE agent_id = $1 AND key = $2 AND deleted_at IS NULL"#,
        agent as AgentId,
        key,
    )
    .fetch_optional(conn)
    .await
}

/// Makes `revision` the source's latest and its candidate, and shows its fields.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn set_candidate(conn: &mut PgConnection, source: SourceId, revision: RevisionId) -> sqlx::Result<()> {
    let set = sqlx::query!(
        r#"
        UPDATE knowledge_sources
        SET latest_revision_id = r.id, candidate_revision_id = r.id,
            revision = r.revision, digest = r.digest, title = r.title, provenance_kind = r.provenance_kind,
            provenance_uri = r.provenance_uri, required = r.required, imported_at = r.imported_at,
            candidate_revision = r.revision, candidate_digest = r.digest, candidate_state = r.state,
            candidate_imported_at = r.imported_at, candidate_error_code = r.error_code,
            candidate_bytes = r.content_bytes
        FROM knowledge_revisions r
        WHERE knowledge_sources.id = $1 AND r.id = $2
        "#,
        source as SourceId,
        revision as RevisionId,
    )
    .execute(conn)
    .await?;
    // Both rows were written by this transaction: a miss is a bug, not a race.
    if set.rows_affected() != 1 {
        return Err(sqlx::Error::RowNotFound);
    }
    Ok(())
}

/// Fails a revision still to be processed; its content bytes (now freed) and
/// Workspace, or `None` when it was not unfinished.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn fail(
    conn: &mut PgConnection,
    revision: RevisionId,
    error_code: &str,
) -> sqlx::Result<Option<(WorkspaceId, i64)>> {
    // The source, when the revision is its candidate, shows the failure: the
    // caller holds the source's row.
    let row = sqlx::query!(
        r#"
        WITH failed AS (
            UPDATE knowledge_revisions
            SET state = 'failed', error_code = $2, content = NULL, lease_owner = NULL, lease_until = NULL
            WHERE id = $1 AND state IN ('pending', 'processing')
            RETURNING source_id, workspace_id, content_bytes
        ), shown AS (
            UPDATE knowledge_sources s SET candidate_state = 'failed', candidate_error_code = $2
            FROM failed WHERE s.id = failed.source_id AND s.candidate_revision_id = $1
        )
        SELECT workspace_id AS "workspace_id!: WorkspaceId", content_bytes AS "content_bytes!" FROM failed
        "#,
        revision as RevisionId,
        error_code,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.workspace_id, i64::from(r.content_bytes))))
}

/// Soft-deletes a source: gone from list and inspect at once.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn delete_source(conn: &mut PgConnection, source: SourceId) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE knowledge_sources SET deleted_at = now(), active_revision_id = NULL WHERE id = $1",
        source as SourceId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Retires an active revision (replaced or deleted): it stops answering, and
/// its content, passages and term counts are dropped. Returns its content bytes.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn retire(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<i64> {
    sqlx::query!("DELETE FROM knowledge_passages WHERE revision_id = $1", revision as RevisionId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM knowledge_terms WHERE revision_id = $1", revision as RevisionId)
        .execute(&mut *conn)
        .await?;
    let bytes = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_revisions SET state = 'replaced', content = NULL
        WHERE id = $1 AND state = 'active'
        RETURNING content_bytes
        "#,
        revision as RevisionId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(bytes.map(i64::from).unwrap_or_default())
}

/// A revision as a worker finds it, locked.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
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
/// order is the Workspace's usage row, the source, then its revisions.
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
        SELECT state AS "state: StoredRevisionState", attempts,
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

/// Starts an attempt: `processing` (and so shown by its source, whose row the
/// caller holds), leased to `worker` for `lease_secs`.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn start_attempt(
    conn: &mut PgConnection,
    revision: RevisionId,
    worker: &str,
    lease_secs: f64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        WITH started AS (
            UPDATE knowledge_revisions
            SET state = 'processing', attempts = attempts + 1, lease_owner = $2,
                lease_until = now() + make_interval(secs => $3)
            WHERE id = $1
            RETURNING source_id
        )
        UPDATE knowledge_sources s SET candidate_state = 'processing'
        FROM started WHERE s.id = started.source_id AND s.candidate_revision_id = $1
        "#,
        revision as RevisionId,
        worker,
        lease_secs,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Extends `worker`'s lease; `false` when it no longer holds one.
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

/// Gives a lease up at once (after a failed attempt), so the next job for the
/// revision need not wait for it to run out.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn release_lease(conn: &mut PgConnection, revision: RevisionId, worker: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE knowledge_revisions SET lease_until = now() WHERE id = $1 AND lease_owner = $2",
        revision as RevisionId,
        worker,
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

/// The PostgreSQL text-search configuration of a language.
pub fn search_config(language: StoredLanguage) -> &'static str {
    match language {
        StoredLanguage::En => "english",
        StoredLanguage::Es => "spanish",
    }
}

/// The passages of one revision, column by column.
pub struct Passages<'a> {
    pub revision: RevisionId,
    pub source: SourceId,
    pub agent: AgentId,
    pub language: StoredLanguage,
    pub title: &'a str,
    pub headings: Vec<Option<String>>,
    pub bodies: Vec<String>,
    /// Words of each passage, title and heading included: its length for BM25.
    pub words: Vec<i32>,
}

/// Writes a revision's passages, indexed in its language (the revision's title
/// first, weighted `A` so ranking can tell title words apart, then heading and
/// body), and their term counts. Returns the passages and word
/// occurrences that have any indexable word.
#[tracing::instrument(level = "debug", skip(conn, passages), fields(revision = %passages.revision, n = passages.bodies.len()))]
pub async fn index(conn: &mut PgConnection, passages: &Passages<'_>) -> sqlx::Result<(i64, i64)> {
    let config = search_config(passages.language);
    // A passage written by an attempt that did not finish is gone with its
    // transaction; these statements run in the promotion's.
    let indexed = sqlx::query!(
        r#"
        WITH input AS (
            SELECT ordinality::integer - 1 AS ordinal, heading, body, tokens,
                   setweight(to_tsvector($5::regconfig, $6), 'A')
                   || to_tsvector($5::regconfig, coalesce(heading || E'\n', '') || body) AS search
            FROM unnest($7::text[], $8::text[], $9::int[]) WITH ORDINALITY AS p(heading, body, tokens)
        ), inserted AS (
            INSERT INTO knowledge_passages (revision_id, ordinal, agent_id, source_id, language, heading, body, search, tokens)
            SELECT $1, ordinal, $2, $3, $4, heading, body, search, tokens
            FROM input
            RETURNING search, tokens
        )
        SELECT count(*) FILTER (WHERE search <> ''::tsvector) AS "passages!", coalesce(sum(tokens), 0)::bigint AS "tokens!"
        FROM inserted
        "#,
        passages.revision as RevisionId,
        passages.agent as AgentId,
        passages.source as SourceId,
        passages.language as StoredLanguage,
        config as &str,
        passages.title,
        &passages.headings as &[Option<String>],
        &passages.bodies,
        &passages.words,
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        r#"
        INSERT INTO knowledge_terms (agent_id, language, lexeme, revision_id, passages,
                                     ordinals, counts, title_counts, lengths)
        SELECT $2, $3, t.lexeme, $1, count(*)::integer,
               array_agg(p.ordinal ORDER BY p.ordinal),
               array_agg(cardinality(t.positions)::smallint ORDER BY p.ordinal),
               array_agg(cardinality(array_positions(t.weights, 'A'))::smallint ORDER BY p.ordinal),
               array_agg(p.tokens ORDER BY p.ordinal)
        FROM knowledge_passages p, unnest(p.search) AS t
        WHERE p.revision_id = $1
        GROUP BY t.lexeme
        "#,
        passages.revision as RevisionId,
        passages.agent as AgentId,
        passages.language as StoredLanguage,
    )
    .execute(conn)
    .await?;
    Ok((indexed.passages, indexed.tokens))
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

/// Unfinished revisions nobody is working on whose last job was sent longer
/// ago than `after_secs`, marked as sent again now.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn take_stale(conn: &mut PgConnection, after_secs: f64, limit: i64) -> sqlx::Result<Vec<RevisionId>> {
    sqlx::query_scalar!(
        r#"
        UPDATE knowledge_revisions SET enqueued_at = now()
        WHERE id IN (
            SELECT id FROM knowledge_revisions
            WHERE state IN ('pending', 'processing')
              AND enqueued_at < now() - make_interval(secs => $1)
              AND (lease_until IS NULL OR lease_until < now())
            ORDER BY enqueued_at
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        )
        RETURNING id AS "id: RevisionId"
        "#,
        after_secs,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Revisions still to be processed, and how long the oldest has waited (in
/// seconds, 0 when none).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn backlog(conn: &mut PgConnection) -> sqlx::Result<(i64, f64)> {
    let row = sqlx::query!(
        r#"
        SELECT count(*) AS "count!",
               coalesce(extract(epoch FROM now() - min(imported_at))::float8, 0) AS "oldest!"
        FROM knowledge_revisions WHERE state IN ('pending', 'processing')
        "#
    )
    .fetch_one(conn)
    .await?;
    Ok((row.count, row.oldest))
}

/// Deletes every live source of an Agent: unfinished revisions are failed,
/// active ones retired. Returns the sources deleted and the content bytes freed.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn delete_all_of(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<(i64, i64)> {
    // Sources first, then their revisions: the store's lock order.
    let deleted = sqlx::query!(
        "UPDATE knowledge_sources SET deleted_at = now(), active_revision_id = NULL WHERE agent_id = $1 AND deleted_at IS NULL",
        agent as AgentId,
    )
    .execute(&mut *conn)
    .await?;
    let failed = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_revisions
        SET state = 'failed', error_code = 'superseded', content = NULL, lease_owner = NULL, lease_until = NULL
        WHERE agent_id = $1 AND state IN ('pending', 'processing')
        RETURNING content_bytes
        "#,
        agent as AgentId,
    )
    .fetch_all(&mut *conn)
    .await?;
    // Passages exist for active revisions only (found by their index).
    sqlx::query!(
        "DELETE FROM knowledge_passages WHERE revision_id IN
           (SELECT id FROM knowledge_revisions WHERE agent_id = $1 AND state = 'active')",
        agent as AgentId,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM knowledge_terms WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    let retired = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_revisions SET state = 'replaced', content = NULL
        WHERE agent_id = $1 AND state = 'active'
        RETURNING content_bytes
        "#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await?;
    let freed = failed.iter().chain(&retired).map(|b| i64::from(*b)).sum();
    Ok((deleted.rows_affected() as i64, freed))
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

/// The languages an Agent's active revisions were indexed in.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn languages(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Vec<StoredLanguage>> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT language AS "language!: StoredLanguage" FROM knowledge_revisions
           WHERE agent_id = $1 AND state = 'active' AND language IS NOT NULL"#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await
}

/// A passage as ranking found it.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub source_id: SourceId,
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub score: f64,
}

/// What ranking needs to know of a question's words in an Agent's passages of
/// one language: the passages there are, their mean length, and each word of
/// the question that occurs, with its document frequency, rarest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Vocabulary {
    /// Passages of the Agent's active revisions in the language.
    pub passages: f64,
    /// Their mean length in words.
    pub mean_length: f64,
    /// (lexeme, passages holding it), rarest first.
    pub terms: Vec<(String, f64)>,
}

impl Vocabulary {
    /// BM25's inverse document frequency of the `i`-th term.
    pub fn idf(&self, i: usize) -> f64 {
        let df = self.terms[i].1;
        (1.0 + (self.passages - df + 0.5) / (df + 0.5)).ln()
    }
}

/// The question's words as the Agent's passages in `language` hold them.
#[tracing::instrument(level = "debug", skip(conn, question))]
pub async fn vocabulary(
    conn: &mut PgConnection,
    agent: AgentId,
    language: StoredLanguage,
    question: &str,
) -> sqlx::Result<Vocabulary> {
    // One statement: the sizes ride along on every term's row (no row, no
    // term, and then they are not needed).
    let rows = sqlx::query!(
        r#"
        WITH stats AS (
            SELECT coalesce(sum(passages), 0)::float8 AS passages,
                   coalesce(sum(tokens), 0)::float8 / greatest(sum(passages), 1) AS mean_length
            FROM knowledge_revisions WHERE agent_id = $1 AND state = 'active' AND language = $2
        )
        SELECT l.lexeme AS "lexeme!", f.df AS "df!", stats.passages AS "passages!", stats.mean_length AS "mean_length!"
        FROM (SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector($3::regconfig, $4))) AS l(lexeme)) l
        CROSS JOIN stats
        CROSS JOIN LATERAL (
            SELECT coalesce(sum(k.passages), 0)::float8 AS df FROM knowledge_terms k
            WHERE k.agent_id = $1 AND k.language = $2 AND k.lexeme = l.lexeme
        ) f
        WHERE f.df > 0
        ORDER BY f.df, l.lexeme COLLATE "C"
        "#,
        agent as AgentId,
        language as StoredLanguage,
        search_config(language) as &str,
        question,
    )
    .fetch_all(conn)
    .await?;
    let (passages, mean_length) = rows.first().map_or((0.0, 0.0), |r| (r.passages, r.mean_length));
    Ok(Vocabulary { passages, mean_length, terms: rows.into_iter().map(|r| (r.lexeme, r.df)).collect() })
}

/// The postings of one lexeme in one active revision: the passages holding it
/// (by ordinal, ascending), with its occurrences in each, those in the
/// revision's title, and each passage's length in words.
#[derive(Clone, Debug, PartialEq)]
pub struct Postings {
    pub lexeme: String,
    pub revision_id: RevisionId,
    pub source_id: SourceId,
    pub ordinals: Vec<i32>,
    pub counts: Vec<i16>,
    pub title_counts: Vec<i16>,
    pub lengths: Vec<i32>,
}

/// The postings of `lexemes` in the Agent's active revisions of `language`,
/// one row per lexeme and revision, streamed: the caller keeps only what it
/// makes of them. (No `ORDER BY`: PostgreSQL would sort every posting before
/// sending the first.)
pub fn postings<'a>(
    conn: &'a mut PgConnection,
    agent: AgentId,
    language: StoredLanguage,
    lexemes: &'a [String],
) -> BoxStream<'a, sqlx::Result<Postings>> {
    sqlx::query_as!(
        Postings,
        r#"
        SELECT k.lexeme, k.revision_id AS "revision_id: RevisionId", r.source_id AS "source_id: SourceId",
               k.ordinals, k.counts, k.title_counts, k.lengths
        FROM knowledge_terms k JOIN knowledge_revisions r ON r.id = k.revision_id
        WHERE k.agent_id = $1 AND k.language = $2 AND k.lexeme = ANY($3)
        "#,
        agent as AgentId,
        language as StoredLanguage,
        lexemes,
    )
    .fetch(conn)
}

/// A ranked passage's text and source, with a snippet around the question's
/// words.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub source_id: SourceId,
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub title: String,
    pub uri: String,
    pub heading: Option<String>,
    pub body: String,
    pub snippet: String,
}

#[tracing::instrument(level = "debug", skip(conn, question, ranked), fields(n = ranked.len()))]
pub async fn found(
    conn: &mut PgConnection,
    language: StoredLanguage,
    question: &str,
    ranked: &[Ranked],
) -> sqlx::Result<Vec<Found>> {
    let revisions: Vec<Uuid> = ranked.iter().map(|r| r.revision_id.0).collect();
    let ordinals: Vec<i32> = ranked.iter().map(|r| r.ordinal).collect();
    sqlx::query_as!(
        Found,
        r#"
        SELECT p.source_id AS "source_id: SourceId", p.revision_id AS "revision_id: RevisionId", p.ordinal,
               r.title, r.provenance_uri AS uri, p.heading, p.body,
               ts_headline($1::regconfig, p.body,
                           replace(plainto_tsquery($1::regconfig, $2)::text, ' & ', ' | ')::tsquery,
                           'MaxFragments=2, MinWords=12, MaxWords=40, StartSel="", StopSel="", FragmentDelimiter=" … "')
                   AS "snippet!"
        FROM unnest($3::uuid[], $4::int[]) AS w(revision_id, ordinal)
        JOIN knowledge_passages p ON p.revision_id = w.revision_id AND p.ordinal = w.ordinal
        JOIN knowledge_revisions r ON r.id = p.revision_id
        "#,
        search_config(language) as &str,
        question,
        &revisions,
        &ordinals,
    )
    .fetch_all(conn)
    .await
}

/// An Agent's live sources with an active revision, and its required sources
/// without one.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn readiness(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!(
        r#"
        SELECT count(*) FILTER (WHERE active_id IS NOT NULL) AS "active!",
               count(*) FILTER (WHERE required AND active_id IS NULL) AS "required_missing!"
        FROM knowledge_source_view WHERE agent_id = $1
        "#,
        agent as AgentId,
    )
    .fetch_one(conn)
    .await?;
    Ok((row.active, row.required_missing))
}

/// A pool of one connection for listening (outside `pool`'s limit, and
/// without its idle and lifetime limits: the connection is held for good).
pub fn listener_pool(pool: &sqlx::PgPool) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with((*pool.connect_options()).clone())
}

/// Listens on `channel` over `own`'s connection (see [`listener_pool`]).
pub async fn listen(own: &sqlx::PgPool, channel: &str) -> sqlx::Result<sqlx::postgres::PgListener> {
    let mut listener = sqlx::postgres::PgListener::connect_with(own).await?;
    // A lost connection ends this listener: the caller starts again, knowing
    // that notifications may have been missed meanwhile.
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}
