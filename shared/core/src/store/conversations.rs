//! Conversations: the unit public answers are counted in. A new one grows the
//! Workspace's `usage.conversations` within its limit, in the same statement.

use sqlx::PgConnection;

use crate::ids::{AgentId, ConversationId, WorkspaceId};

/// Records a new conversation and counts it, if the month's count stays within
/// `limit`: `false`, with nothing written, when the quota is spent.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn start(
    conn: &mut PgConnection,
    id: ConversationId,
    workspace: WorkspaceId,
    agent: AgentId,
    limit: i64,
) -> sqlx::Result<bool> {
    let started = sqlx::query_scalar!(
        r#"
        WITH month AS (SELECT date_trunc('month', now() AT TIME ZONE 'UTC')::date AS start),
             counted AS (
                 UPDATE workspace_usage u SET
                     conversations = CASE WHEN u.conversations_month = month.start
                                          THEN u.conversations ELSE 0 END + 1,
                     conversations_month = month.start
                 FROM month
                 WHERE u.workspace_id = $2
                   AND CASE WHEN u.conversations_month = month.start
                            THEN u.conversations ELSE 0 END + 1 <= $4
                 RETURNING u.workspace_id
             )
        INSERT INTO conversations (id, workspace_id, agent_id)
        SELECT $1, workspace_id, $3 FROM counted
        RETURNING 1 AS "started!"
        "#,
        id as ConversationId,
        workspace as WorkspaceId,
        agent as AgentId,
        limit,
    )
    .fetch_optional(conn)
    .await?;
    Ok(started.is_some())
}

/// Forgets a conversation that never got its first answer, and uncounts it if
/// it was counted in the current month.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn give_back(conn: &mut PgConnection, id: ConversationId) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        WITH gone AS (DELETE FROM conversations WHERE id = $1 RETURNING workspace_id, created_at)
        UPDATE workspace_usage u SET conversations = greatest(u.conversations - 1, 0)
        FROM gone
        WHERE u.workspace_id = gone.workspace_id
          AND u.conversations_month = date_trunc('month', gone.created_at AT TIME ZONE 'UTC')::date
        "#,
        id as ConversationId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the conversation exists and belongs to the Agent.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn exists(conn: &mut PgConnection, id: ConversationId, agent: AgentId) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT 1 AS "found!" FROM conversations WHERE id = $1 AND agent_id = $2"#,
        id as ConversationId,
        agent as AgentId,
    )
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}
