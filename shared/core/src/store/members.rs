//! A Workspace's members, for the web application's members page.

use sqlx::PgConnection;

use super::types::StoredRole;
use crate::ids::{UserId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct MemberRow {
    pub user_id: UserId,
    pub email: String,
    pub name: Option<String>,
    pub role: StoredRole,
}

/// Members, oldest membership first.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Vec<MemberRow>> {
    sqlx::query_as!(
        MemberRow,
        r#"
        SELECT u.id AS "user_id: UserId", u.email, u.name, m.role AS "role: StoredRole"
        FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.workspace_id = $1
        ORDER BY m.created_at, u.id
        "#,
        workspace as WorkspaceId,
    )
    .fetch_all(conn)
    .await
}

/// The members' roles, locked until the transaction ends: role changes and
/// removals of one Workspace take their turn, so "the last owner" is decided
/// on rows nobody else is changing.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock_roles(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Vec<(UserId, StoredRole)>> {
    let rows = sqlx::query!(
        r#"
        SELECT user_id AS "user_id: UserId", role AS "role: StoredRole"
        FROM memberships WHERE workspace_id = $1 ORDER BY user_id FOR UPDATE
        "#,
        workspace as WorkspaceId,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.user_id, r.role)).collect())
}

/// Adds a member unless they are one already (an invite never changes the
/// role of someone who is a member); whether a membership was added.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn add_if_absent(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    user: UserId,
    role: StoredRole,
) -> sqlx::Result<bool> {
    let added = sqlx::query!(
        r#"
        INSERT INTO memberships (user_id, workspace_id, role) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, workspace_id) DO NOTHING
        "#,
        user as UserId,
        workspace as WorkspaceId,
        role as StoredRole,
    )
    .execute(conn)
    .await?;
    Ok(added.rows_affected() == 1)
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn remove(conn: &mut PgConnection, workspace: WorkspaceId, user: UserId) -> sqlx::Result<()> {
    sqlx::query!(
        "DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2",
        workspace as WorkspaceId,
        user as UserId,
    )
    .execute(conn)
    .await?;
    Ok(())
}
