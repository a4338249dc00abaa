//! Knowledge Sources and their revisions as the API writes and reads them.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::entitlements::{Entitlement, LimitKey};
use crate::ids::{AgentId, RevisionId, SourceId, WorkspaceId};
use crate::store::types::{StoredProvenanceKind, StoredRevisionState, StoredWorkspaceStatus};
use crate::store::usage::shards::SHARDS;
use crate::store::workspaces::Held;

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

/// What [`add_source`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Added {
    /// The source and its first revision are in: the source as
    /// `knowledge_source_view` shows it, and whether its usage was counted
    /// on a shard (the [`Room`] asked for) in the same statement.
    Added { row: Box<SourceRow>, room_taken: bool },
    /// The Agent is not live in the Workspace: nothing was written.
    NoAgent,
    /// A live source of the Agent has the key (or one has the id: an earlier
    /// attempt of the same call): nothing was written.
    KeyExists,
}

/// The usage an add counts on one of the Workspace's usage shards in its own
/// statement, under the limits of the Entitlement the call was admitted with
/// (`plan`, `limit_overrides`): taken only if the Workspace, held by that
/// statement, still has that plan and those overrides, and only from room
/// shared out under these limits (see `store::usage::shards`). The overrides
/// are compared as PostgreSQL writes them out, so a stored value the
/// Entitlement does not read as a limit (`20000.0`, `-1`, a string) never
/// matches.
pub struct Room<'a> {
    pub plan: &'a str,
    pub limit_overrides: serde_json::Value,
    pub sources_limit: i64,
    pub bytes_limit: i64,
}

impl Room<'_> {
    /// Room under the limits of `entitlement` (the Entitlement the call was
    /// admitted with).
    pub fn under(entitlement: &Entitlement) -> Room<'_> {
        Room {
            plan: entitlement.plan.as_str(),
            limit_overrides: serde_json::json!(entitlement.limit_overrides),
            sources_limit: entitlement.limit_i64(LimitKey::KnowledgeSources),
            bytes_limit: entitlement.limit_i64(LimitKey::KnowledgeBytes),
        }
    }
}

/// The Workspace as an add that commits by itself (its statement outside a
/// transaction) was admitted under, beside the plan and overrides of its
/// [`Room`]: that statement writes only if the Workspace's row, which it holds,
/// still is so, and only with room on a shard to count the source on (see
/// [`add_source`]).
#[derive(Clone, Copy, Debug)]
pub struct Standing {
    pub status: StoredWorkspaceStatus,
    pub trial_end: Option<OffsetDateTime>,
    pub period_end: Option<OffsetDateTime>,
    pub cancel_at_period_end: bool,
}

impl Standing {
    /// The Workspace in `status` under `entitlement`.
    pub fn of(status: StoredWorkspaceStatus, entitlement: &Entitlement) -> Self {
        Self {
            status,
            trial_end: entitlement.trial_end,
            period_end: entitlement.period_end,
            cancel_at_period_end: entitlement.cancel_at_period_end,
        }
    }
}

/// The SQLSTATE of an add's statement run `alone` that inserted its source
/// and found no room to count it on: it failed, so it wrote nothing
/// (migration 0027).
pub const UNCOUNTED: &str = "SVC01";

/// Inserts the source of `first` and its first revision, showing it as latest
/// and candidate, in one statement that also holds, until the transaction
/// ends, the Workspace's row `FOR SHARE` (what it returns, for the caller to
/// admit the write under: an archive or plan change waits for the add, or is
/// seen by it) and the Agent's (an Agent being deleted waits, or is seen
/// deleted); and that counts the source's usage on a shard when `room` allows.
/// The rows are taken in the order every write takes them: Workspace, Agent,
/// source, revision, shard.
///
/// `alone` is for a statement that is its own transaction (it commits by
/// itself): it then writes only if the Workspace is as `alone` and `room`
/// say and a shard has room for the source, and if it inserted the source but
/// took no room after all (a concurrent add took the last of it, or held the
/// shards), it fails with [`UNCOUNTED`] and so writes nothing. An outcome
/// other than a counted `Added` wrote nothing either: the caller runs the add
/// in a transaction.
#[tracing::instrument(level = "debug", skip(conn, first, room), fields(id = %first.source_id))]
pub async fn add_source(
    conn: &mut PgConnection,
    key: &str,
    first: &NewRevision<'_>,
    room: &Room<'_>,
    alone: Option<&Standing>,
) -> sqlx::Result<(Held, Added)> {
    // `now()` is the transaction's start: the source's and the revision's.
    let row = sqlx::query!(
        r#"
        WITH workspace AS (
            SELECT status, plan, trial_end, period_end, cancel_at_period_end, limit_overrides
            FROM workspaces WHERE id = $2 FOR SHARE
        ), agent AS (
            SELECT 1 FROM agents
            WHERE id = $3 AND workspace_id = $2 AND deleted_at IS NULL AND EXISTS (SELECT 1 FROM workspace)
            FOR SHARE
        ), source AS (
            INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id,
                                           candidate_revision_id, revision, digest, title, provenance_kind,
                                           provenance_uri, required, imported_at, candidate_revision,
                                           candidate_digest, candidate_state, candidate_imported_at,
                                           candidate_bytes)
            SELECT $1::uuid, $2::uuid, $3::uuid, $4::text, $5::uuid, $5::uuid, $6::text, $7::text, $8::text,
                   $9::provenance_kind, $10::text, $11::boolean, now(), $6::text, $7::text, 'pending', now(),
                   $12::integer
            FROM agent
            WHERE $19::workspace_status IS NULL
               OR (EXISTS (SELECT 1 FROM workspace
                           WHERE status = $19 AND trial_end IS NOT DISTINCT FROM $20
                             AND period_end IS NOT DISTINCT FROM $21 AND cancel_at_period_end = $22
                             AND plan = $16 AND limit_overrides::text = $17::jsonb::text)
                   AND EXISTS (SELECT 1 FROM workspace_usage_shards
                               WHERE workspace_id = $2 AND sources_room >= 1 AND bytes_room >= $12
                                 AND room_limits = ARRAY[$14::bigint, $15::bigint]))
            -- On any unique index: the live key's, or the id's when an earlier
            -- attempt of the call (its outcome lost) inserts it meanwhile. A
            -- unique index added to this table later is one more such
            -- conflict (answered `key_exists`); a deferrable one cannot be an
            -- arbiter and would fail every add.
            ON CONFLICT DO NOTHING
            RETURNING id
        ), revision AS (
            INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title,
                                             provenance_kind, provenance_uri, required, content, content_bytes)
            SELECT $5::uuid, id, $2::uuid, $3::uuid, $6::text, $7::text, $8::text, $9::provenance_kind,
                   $10::text, $11::boolean, $13::text, $12::integer
            FROM source
            RETURNING 1
        ), room AS (
            -- As `store::usage::shards::take_room`, once the revision is in.
            UPDATE workspace_usage_shards s SET
                sources = s.sources + 1, bytes = s.bytes + $12,
                sources_room = s.sources_room - 1, bytes_room = s.bytes_room - $12
            WHERE s.workspace_id = $2 AND s.shard = (
                SELECT shard FROM workspace_usage_shards
                WHERE workspace_id = $2 AND sources_room >= 1 AND bytes_room >= $12
                  AND room_limits = ARRAY[$14::bigint, $15::bigint]
                  AND EXISTS (SELECT 1 FROM revision)
                  AND EXISTS (SELECT 1 FROM workspace WHERE plan = $16 AND limit_overrides::text = $17::jsonb::text)
                ORDER BY (shard - pg_backend_pid() % $18::smallint + $18::smallint) % $18::smallint
                LIMIT 1
                FOR UPDATE SKIP LOCKED)
            RETURNING 1
        )
        SELECT w.status AS "status!: StoredWorkspaceStatus", w.plan AS "plan!", w.trial_end AS "trial_end?",
               w.period_end AS "period_end?", w.cancel_at_period_end AS "cancel_at_period_end!",
               w.limit_overrides AS "limit_overrides!",
               EXISTS (SELECT 1 FROM agent) AS "agent!", EXISTS (SELECT 1 FROM revision) AS "added!",
               CASE WHEN EXISTS (SELECT 1 FROM room) THEN true
                    WHEN $19 IS NOT NULL AND EXISTS (SELECT 1 FROM revision) THEN knowledge_add_uncounted()
                    ELSE false END AS "room_taken!",
               now() AS "imported_at!"
        FROM workspace w
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
        first.content,
        room.sources_limit,
        room.bytes_limit,
        room.plan,
        room.limit_overrides,
        SHARDS,
        alone.map(|a| a.status) as Option<StoredWorkspaceStatus>,
        alone.and_then(|a| a.trial_end),
        alone.and_then(|a| a.period_end),
        alone.map(|a| a.cancel_at_period_end),
    )
    .fetch_one(conn)
    .await?;
    let held = Held::from_row(
        row.status,
        &row.plan,
        row.trial_end,
        row.period_end,
        row.cancel_at_period_end,
        &row.limit_overrides,
    );
    let added = match (row.agent, row.added) {
        (false, _) => Added::NoAgent,
        (true, false) => Added::KeyExists,
        (true, true) => {
            Added::Added { row: Box::new(SourceRow::added(key, first, row.imported_at)), room_taken: row.room_taken }
        }
    };
    Ok((held, added))
}

impl SourceRow {
    /// What `knowledge_source_view` shows of a source [`add_source`] just
    /// inserted at `imported_at`: no active revision, and `first` as latest
    /// and pending candidate (the test `add_answers_what_inspect_shows` holds
    /// the two together).
    fn added(key: &str, first: &NewRevision<'_>, imported_at: OffsetDateTime) -> Self {
        Self {
            id: first.source_id,
            workspace_id: first.workspace_id,
            agent_id: first.agent_id,
            key: key.to_owned(),
            revision: first.revision.to_owned(),
            digest: first.digest.to_owned(),
            title: first.title.to_owned(),
            provenance_kind: first.provenance_kind,
            provenance_uri: first.provenance_uri.to_owned(),
            required: first.required,
            imported_at,
            active_id: None,
            active_revision: None,
            active_digest: None,
            active_state: None,
            active_imported_at: None,
            active_error_code: None,
            candidate_id: Some(first.id),
            candidate_revision: Some(first.revision.to_owned()),
            candidate_digest: Some(first.digest.to_owned()),
            candidate_state: Some(StoredRevisionState::Pending),
            candidate_imported_at: Some(imported_at),
            candidate_error_code: None,
            latest_state: StoredRevisionState::Pending,
            active_bytes: None,
            candidate_bytes: Some(first.content_bytes()),
        }
    }
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

/// Retires an active revision (replaced or deleted): its content is dropped
/// (its document leaves the index in the same transaction: `svc_search::retire`).
/// Returns its content bytes.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn retire(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<i64> {
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

/// Deletes every live source of an Agent and fails its unfinished revisions:
/// the first half of an Agent's deletion (then `svc_search::drop_agent`, then
/// [`retire_all_of`]). Returns the sources deleted and the content bytes freed.
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
    Ok((deleted.rows_affected() as i64, failed.iter().map(|b| i64::from(*b)).sum()))
}

/// Retires every active revision of an Agent (whose sources are deleted).
/// Returns the content bytes freed.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn retire_all_of(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<i64> {
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
    Ok(retired.iter().map(|b| i64::from(*b)).sum())
}

/// The title and provenance URI of revisions: what an answer cites.
#[tracing::instrument(level = "debug", skip(conn, revisions), fields(n = revisions.len()))]
pub async fn citations(
    conn: &mut PgConnection,
    revisions: &[RevisionId],
) -> sqlx::Result<Vec<(RevisionId, String, String)>> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    let rows = sqlx::query!(
        r#"SELECT id AS "id: RevisionId", title, provenance_uri FROM knowledge_revisions WHERE id = ANY($1)"#,
        &ids,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.title, r.provenance_uri)).collect())
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
