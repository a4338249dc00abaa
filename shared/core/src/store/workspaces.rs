//! Workspaces and memberships.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::ids::{UserId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceRow {
    pub id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub status: String,
    /// The listing User's role.
    pub role: Option<String>,
}

/// Inserts a Workspace on a trial ending at `trial_end`; `None` when the slug is taken.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn insert(
    conn: &mut PgConnection,
    id: WorkspaceId,
    name: &str,
    slug: &str,
    trial_end: OffsetDateTime,
) -> sqlx::Result<Option<WorkspaceRow>> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        INSERT INTO workspaces (id, name, slug, plan, trial_end) VALUES ($1, $2, $3, 'trial', $4)
        ON CONFLICT (slug) DO NOTHING
        RETURNING id AS "id: WorkspaceId", name, slug, status, NULL::text AS role
        "#,
        id as WorkspaceId,
        name,
        slug,
        trial_end,
    )
    .fetch_optional(conn)
    .await
}

/// A new Workspace, for [`super::insert_with_free_slug`].
pub struct NewWorkspace<'a> {
    pub id: WorkspaceId,
    pub name: &'a str,
    pub trial_end: OffsetDateTime,
}

impl super::Slugged for NewWorkspace<'_> {
    type Row = WorkspaceRow;

    async fn insert(&self, conn: &mut PgConnection, slug: &str) -> sqlx::Result<Option<WorkspaceRow>> {
        insert(conn, self.id, self.name, slug, self.trial_end).await
    }

    async fn slugs_like(&self, conn: &mut PgConnection, base: &str) -> sqlx::Result<Vec<String>> {
        slugs_like(conn, base).await
    }
}

/// Slugs that could be candidates for `base` (see [`super::Slugged::slugs_like`]).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn slugs_like(conn: &mut PgConnection, base: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!("SELECT slug FROM workspaces WHERE slug LIKE left($1, 50) || '%'", base).fetch_all(conn).await
}

/// Adds a member, or changes an existing member's role.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn set_member(conn: &mut PgConnection, workspace: WorkspaceId, user: UserId, role: &str) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO memberships (user_id, workspace_id, role) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = EXCLUDED.role
        "#,
        user as UserId,
        workspace as WorkspaceId,
        role,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// One page of a User's Workspaces, oldest first, after `after`.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn list_for_user(
    conn: &mut PgConnection,
    user: UserId,
    after: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<WorkspaceRow>> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        SELECT w.id AS "id: WorkspaceId", w.name, w.slug, w.status, m.role AS "role?"
        FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
        WHERE m.user_id = $1 AND ($2::uuid IS NULL OR w.id > $2)
        ORDER BY w.id
        LIMIT $3
        "#,
        user as UserId,
        after,
        limit,
    )
    .fetch_all(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn rename(conn: &mut PgConnection, id: WorkspaceId, name: &str) -> sqlx::Result<WorkspaceRow> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        UPDATE workspaces SET name = $2 WHERE id = $1
        RETURNING id AS "id: WorkspaceId", name, slug, status, NULL::text AS role
        "#,
        id as WorkspaceId,
        name,
    )
    .fetch_one(conn)
    .await
}

/// Finds a Workspace by id or slug (operators name Workspaces either way).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn find(
    conn: &mut PgConnection,
    id: Option<WorkspaceId>,
    slug: Option<&str>,
) -> sqlx::Result<Option<WorkspaceRow>> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        SELECT id AS "id: WorkspaceId", name, slug, status, NULL::text AS role
        FROM workspaces WHERE id = $1 OR slug = $2
        "#,
        id.map(|i| i.0),
        slug,
    )
    .fetch_optional(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn set_status(conn: &mut PgConnection, id: WorkspaceId, status: &str) -> sqlx::Result<WorkspaceRow> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        UPDATE workspaces SET status = $2 WHERE id = $1
        RETURNING id AS "id: WorkspaceId", name, slug, status, NULL::text AS role
        "#,
        id as WorkspaceId,
        status,
    )
    .fetch_one(conn)
    .await
}
