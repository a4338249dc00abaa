//! Agents. Deleted Agents are kept (soft delete) but never returned.

use sqlx::PgConnection;
use uuid::Uuid;

use super::types::StoredLanguage;
use crate::ids::{AgentId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct AgentRow {
    pub id: AgentId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub default_language: StoredLanguage,
    pub instructions: Option<String>,
    pub temperature: f64,
}

/// A new Agent's fields.
#[derive(Clone, Debug)]
pub struct NewAgent<'a> {
    pub id: AgentId,
    pub workspace_id: WorkspaceId,
    pub name: &'a str,
    pub slug: &'a str,
    pub default_language: StoredLanguage,
    pub instructions: Option<&'a str>,
    pub temperature: f64,
}

/// Inserts an Agent; `None` when a live Agent of the Workspace has the slug.
#[tracing::instrument(level = "debug", skip(conn, agent), fields(id = %agent.id))]
pub async fn insert(conn: &mut PgConnection, agent: &NewAgent<'_>) -> sqlx::Result<Option<AgentRow>> {
    sqlx::query_as!(
        AgentRow,
        r#"
        INSERT INTO agents (id, workspace_id, name, slug, default_language, instructions, temperature)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (workspace_id, slug) WHERE deleted_at IS NULL DO NOTHING
        RETURNING id AS "id: AgentId", workspace_id AS "workspace_id: WorkspaceId", name, slug,
                  default_language AS "default_language: StoredLanguage", instructions, temperature
        "#,
        agent.id as AgentId,
        agent.workspace_id as WorkspaceId,
        agent.name,
        agent.slug,
        agent.default_language as StoredLanguage,
        agent.instructions,
        agent.temperature,
    )
    .fetch_optional(conn)
    .await
}

impl super::Slugged for NewAgent<'_> {
    type Row = AgentRow;

    async fn insert(&self, conn: &mut PgConnection, slug: &str) -> sqlx::Result<Option<AgentRow>> {
        insert(conn, &NewAgent { slug, ..self.clone() }).await
    }

    async fn slugs_like(&self, conn: &mut PgConnection, base: &str) -> sqlx::Result<Vec<String>> {
        slugs_like(conn, self.workspace_id, base).await
    }

    fn scope(&self) -> String {
        format!("agents of {}", self.workspace_id)
    }
}

/// Live slugs of the Workspace that could be candidates for `base` (see
/// [`super::Slugged::slugs_like`]): a range of the byte-ordered slug index.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn slugs_like(conn: &mut PgConnection, workspace: WorkspaceId, base: &str) -> sqlx::Result<Vec<String>> {
    let (from, to) = super::prefix_range(base);
    sqlx::query_scalar!(
        r#"SELECT slug FROM agents
           WHERE workspace_id = $1 AND deleted_at IS NULL AND slug >= $2 AND slug < $3"#,
        workspace as WorkspaceId,
        from,
        to,
    )
    .fetch_all(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId, id: AgentId) -> sqlx::Result<Option<AgentRow>> {
    sqlx::query_as!(
        AgentRow,
        r#"
        SELECT id AS "id: AgentId", workspace_id AS "workspace_id: WorkspaceId", name, slug,
               default_language AS "default_language: StoredLanguage", instructions, temperature
        FROM agents WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL
        "#,
        id as AgentId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await
}

/// One page of live Agents, oldest first, after `after`.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<AgentRow>> {
    sqlx::query_as!(
        AgentRow,
        r#"
        SELECT id AS "id: AgentId", workspace_id AS "workspace_id: WorkspaceId", name, slug,
               default_language AS "default_language: StoredLanguage", instructions, temperature
        FROM agents
        WHERE workspace_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR id > $2)
        ORDER BY id
        LIMIT $3
        "#,
        workspace as WorkspaceId,
        after,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Writes an Agent's configurable fields; `None` when it does not exist (live).
#[tracing::instrument(level = "debug", skip(conn, agent), fields(id = %agent.id))]
pub async fn update(conn: &mut PgConnection, agent: &AgentRow) -> sqlx::Result<Option<AgentRow>> {
    sqlx::query_as!(
        AgentRow,
        r#"
        UPDATE agents SET name = $3, default_language = $4, instructions = $5, temperature = $6
        WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL
        RETURNING id AS "id: AgentId", workspace_id AS "workspace_id: WorkspaceId", name, slug,
                  default_language AS "default_language: StoredLanguage", instructions, temperature
        "#,
        agent.id as AgentId,
        agent.workspace_id as WorkspaceId,
        agent.name,
        agent.default_language as StoredLanguage,
        agent.instructions,
        agent.temperature,
    )
    .fetch_optional(conn)
    .await
}

/// Reads a live Agent and locks it until the transaction ends.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock(conn: &mut PgConnection, workspace: WorkspaceId, id: AgentId) -> sqlx::Result<Option<AgentRow>> {
    sqlx::query_as!(
        AgentRow,
        r#"
        SELECT id AS "id: AgentId", workspace_id AS "workspace_id: WorkspaceId", name, slug,
               default_language AS "default_language: StoredLanguage", instructions, temperature
        FROM agents WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL
        FOR UPDATE
        "#,
        id as AgentId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await
}

/// Soft-deletes a live Agent; `false` when there was none.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn soft_delete(conn: &mut PgConnection, workspace: WorkspaceId, id: AgentId) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE agents SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL",
        id as AgentId,
        workspace as WorkspaceId,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether the Agent is live, holding it so until the transaction ends (a
/// delete waits).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn hold(conn: &mut PgConnection, workspace: WorkspaceId, id: AgentId) -> sqlx::Result<bool> {
    let held = sqlx::query_scalar!(
        "SELECT 1 AS held FROM agents WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL FOR SHARE",
        id as AgentId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(held.is_some())
}
