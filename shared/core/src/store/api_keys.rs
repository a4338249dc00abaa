//! Workspace API keys. The secret itself is never here: only its SHA-256.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::ids::{ApiKeyId, UserId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct ApiKeyRow {
    pub id: ApiKeyId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub public_id: String,
    pub preset: Option<String>,
    pub scopes: Vec<String>,
    pub rotated_from_id: Option<ApiKeyId>,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

pub struct NewApiKey<'a> {
    pub id: ApiKeyId,
    pub workspace_id: WorkspaceId,
    pub name: &'a str,
    pub public_id: &'a str,
    pub secret_hash: &'a [u8],
    pub preset: Option<&'a str>,
    pub scopes: &'a [String],
    pub created_by: UserId,
    pub rotated_from_id: Option<ApiKeyId>,
}

/// Inserts a key; `None` in the (astronomically unlikely) case its public id is taken.
#[tracing::instrument(level = "debug", skip(conn, key), fields(id = %key.id))]
pub async fn insert(conn: &mut PgConnection, key: &NewApiKey<'_>) -> sqlx::Result<Option<ApiKeyRow>> {
    sqlx::query_as!(
        ApiKeyRow,
        r#"
        INSERT INTO api_keys (id, workspace_id, name, public_id, secret_hash, preset, scopes, created_by, rotated_from_id)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        ON CONFLICT (public_id) DO NOTHING
        RETURNING id AS "id: ApiKeyId", workspace_id AS "workspace_id: WorkspaceId", name, public_id, preset, scopes,
                  rotated_from_id AS "rotated_from_id: ApiKeyId", created_at, last_used_at, revoked_at
        "#,
        key.id as ApiKeyId,
        key.workspace_id as WorkspaceId,
        key.name,
        key.public_id,
        key.secret_hash,
        key.preset,
        key.scopes,
        key.created_by as UserId,
        key.rotated_from_id.map(|id| id.0),
    )
    .fetch_optional(conn)
    .await
}

/// One page of the Workspace's keys (revoked ones included), oldest first.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<ApiKeyRow>> {
    sqlx::query_as!(
        ApiKeyRow,
        r#"
        SELECT id AS "id: ApiKeyId", workspace_id AS "workspace_id: WorkspaceId", name, public_id, preset, scopes,
               rotated_from_id AS "rotated_from_id: ApiKeyId", created_at, last_used_at, revoked_at
        FROM api_keys
        WHERE workspace_id = $1 AND ($2::uuid IS NULL OR id > $2)
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

/// Reads a key of the Workspace and locks it until the transaction ends.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock(conn: &mut PgConnection, workspace: WorkspaceId, id: ApiKeyId) -> sqlx::Result<Option<ApiKeyRow>> {
    sqlx::query_as!(
        ApiKeyRow,
        r#"
        SELECT id AS "id: ApiKeyId", workspace_id AS "workspace_id: WorkspaceId", name, public_id, preset, scopes,
               rotated_from_id AS "rotated_from_id: ApiKeyId", created_at, last_used_at, revoked_at
        FROM api_keys WHERE id = $1 AND workspace_id = $2
        FOR UPDATE
        "#,
        id as ApiKeyId,
        workspace as WorkspaceId,
    )
    .fetch_optional(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn revoke(conn: &mut PgConnection, id: ApiKeyId) -> sqlx::Result<ApiKeyRow> {
    sqlx::query_as!(
        ApiKeyRow,
        r#"
        UPDATE api_keys SET revoked_at = now() WHERE id = $1
        RETURNING id AS "id: ApiKeyId", workspace_id AS "workspace_id: WorkspaceId", name, public_id, preset, scopes,
                  rotated_from_id AS "rotated_from_id: ApiKeyId", created_at, last_used_at, revoked_at
        "#,
        id as ApiKeyId,
    )
    .fetch_one(conn)
    .await
}

/// Records a use, at most once a minute per key whatever the number of replicas.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn touch(conn: &mut PgConnection, id: ApiKeyId) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE api_keys SET last_used_at = now()
           WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"#,
        id as ApiKeyId,
    )
    .execute(conn)
    .await?;
    Ok(())
}
