//! Workspaces and memberships.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::types::{StoredRole, StoredWorkspaceStatus};
use crate::entitlements::Entitlement;
use crate::ids::{UserId, WorkspaceId};

#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceRow {
    pub id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub status: StoredWorkspaceStatus,
    /// The listing User's role.
    pub role: Option<StoredRole>,
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
        RETURNING id AS "id: WorkspaceId", name, slug, status AS "status: StoredWorkspaceStatus",
                  NULL::member_role AS "role?: StoredRole"
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

    fn scope(&self) -> String {
        "workspaces".to_owned()
    }
}

/// Slugs that could be candidates for `base` (see [`super::Slugged::slugs_like`]):
/// a range of the byte-ordered unique index.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn slugs_like(conn: &mut PgConnection, base: &str) -> sqlx::Result<Vec<String>> {
    let (from, to) = super::prefix_range(base);
    sqlx::query_scalar!("SELECT slug FROM workspaces WHERE slug >= $1 AND slug < $2", from, to).fetch_all(conn).await
}

/// Adds a member, or changes an existing member's role.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn set_member(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    user: UserId,
    role: StoredRole,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO memberships (user_id, workspace_id, role) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = EXCLUDED.role
        "#,
        user as UserId,
        workspace as WorkspaceId,
        role as StoredRole,
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
        SELECT w.id AS "id: WorkspaceId", w.name, w.slug, w.status AS "status: StoredWorkspaceStatus",
               m.role AS "role?: StoredRole"
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
        RETURNING id AS "id: WorkspaceId", name, slug, status AS "status: StoredWorkspaceStatus",
                  NULL::member_role AS "role?: StoredRole"
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
        SELECT id AS "id: WorkspaceId", name, slug, status AS "status: StoredWorkspaceStatus",
               NULL::member_role AS "role?: StoredRole"
        FROM workspaces WHERE id = $1 OR slug = $2
        "#,
        id.map(|i| i.0),
        slug,
    )
    .fetch_optional(conn)
    .await
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn set_status(
    conn: &mut PgConnection,
    id: WorkspaceId,
    status: StoredWorkspaceStatus,
) -> sqlx::Result<WorkspaceRow> {
    sqlx::query_as!(
        WorkspaceRow,
        r#"
        UPDATE workspaces SET status = $2 WHERE id = $1
        RETURNING id AS "id: WorkspaceId", name, slug, status AS "status: StoredWorkspaceStatus",
                  NULL::member_role AS "role?: StoredRole"
        "#,
        id as WorkspaceId,
        status as StoredWorkspaceStatus,
    )
    .fetch_one(conn)
    .await
}

/// A Workspace as a mutation sees it under its lock.
pub struct Held {
    pub status: StoredWorkspaceStatus,
    pub entitlement: Entitlement,
}

impl Held {
    /// From the Workspace row's columns.
    pub fn from_row(
        status: StoredWorkspaceStatus,
        plan: &str,
        trial_end: Option<OffsetDateTime>,
        period_end: Option<OffsetDateTime>,
        cancel_at_period_end: bool,
        limit_overrides: &serde_json::Value,
    ) -> Self {
        let entitlement = Entitlement::from_row(plan, trial_end, period_end, cancel_at_period_end, limit_overrides);
        Self { status, entitlement }
    }
}

/// Reads the Workspace's status and Entitlement and holds its row FOR SHARE until
/// the transaction ends: mutations run side by side, while an archive or plan
/// change waits for them (and they, started after it, see it).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn hold(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Held> {
    let row = sqlx::query!(
        r#"SELECT status AS "status: StoredWorkspaceStatus", plan, trial_end, period_end, cancel_at_period_end,
                  limit_overrides
           FROM workspaces WHERE id = $1 FOR SHARE"#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Held::from_row(
        row.status,
        &row.plan,
        row.trial_end,
        row.period_end,
        row.cancel_at_period_end,
        &row.limit_overrides,
    ))
}
