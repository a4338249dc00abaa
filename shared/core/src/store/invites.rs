//! Invitations to join a Workspace: single use, expiring. Only the SHA-256 of
//! the invite token is stored.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::types::StoredRole;
use crate::ids::{UserId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct InviteRow {
    pub id: Uuid,
    pub workspace_id: WorkspaceId,
    pub workspace_name: String,
    pub role: StoredRole,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

#[tracing::instrument(level = "debug", skip(conn, token_hash))]
pub async fn insert(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    token_hash: &[u8],
    role: StoredRole,
    created_by: UserId,
    expires_at: OffsetDateTime,
) -> sqlx::Result<Uuid> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO workspace_invites (id, workspace_id, token_hash, role, created_by, expires_at)
        VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
        "#,
        Uuid::now_v7(),
        workspace as WorkspaceId,
        token_hash,
        role as StoredRole,
        created_by as UserId,
        expires_at,
    )
    .fetch_one(conn)
    .await
}

/// The invite whose token hashes to `token_hash`, if it is unused, unexpired
/// and its Workspace not archived.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn find_open(conn: &mut PgConnection, token_hash: &[u8]) -> sqlx::Result<Option<InviteRow>> {
    sqlx::query_as!(
        InviteRow,
        r#"
        SELECT i.id, i.workspace_id AS "workspace_id: WorkspaceId", w.name AS workspace_name,
               i.role AS "role: StoredRole", i.created_at, i.expires_at
        FROM workspace_invites i JOIN workspaces w ON w.id = i.workspace_id
        WHERE i.token_hash = $1 AND i.used_at IS NULL AND i.expires_at > now() AND w.status = 'active'
        "#,
        token_hash,
    )
    .fetch_optional(conn)
    .await
}

/// Marks the open invite used by `user`; `None` when it was not open (used
/// meanwhile, expired, unknown). The row lock makes two acceptances of one
/// invite race to a single winner.
#[tracing::instrument(level = "debug", skip(conn, token_hash))]
pub async fn spend(conn: &mut PgConnection, token_hash: &[u8], user: UserId) -> sqlx::Result<Option<InviteRow>> {
    sqlx::query_as!(
        InviteRow,
        r#"
        UPDATE workspace_invites i SET used_at = now(), used_by = $2
        FROM workspaces w
        WHERE w.id = i.workspace_id AND i.token_hash = $1 AND i.used_at IS NULL AND i.expires_at > now()
              AND w.status = 'active'
        RETURNING i.id, i.workspace_id AS "workspace_id: WorkspaceId", w.name AS workspace_name,
                  i.role AS "role: StoredRole", i.created_at, i.expires_at
        "#,
        token_hash,
        user as UserId,
    )
    .fetch_optional(conn)
    .await
}

/// A Workspace's invites that can still be used, oldest first.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list_open(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Vec<InviteRow>> {
    sqlx::query_as!(
        InviteRow,
        r#"
        SELECT i.id, i.workspace_id AS "workspace_id: WorkspaceId", w.name AS workspace_name,
               i.role AS "role: StoredRole", i.created_at, i.expires_at
        FROM workspace_invites i JOIN workspaces w ON w.id = i.workspace_id
        WHERE i.workspace_id = $1 AND i.used_at IS NULL AND i.expires_at > now()
        ORDER BY i.id
        "#,
        workspace as WorkspaceId,
    )
    .fetch_all(conn)
    .await
}
