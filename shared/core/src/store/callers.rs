//! Who a request's credential is, and which Workspace it selects, in one round trip.

use serde_json::Value;
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::types::{StoredRole, StoredWorkspaceStatus};
use crate::ids::{ApiKeyId, UserId, WorkspaceId};

/// How a request names its Workspace (the `Svc-Workspace` header).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// No header.
    None,
    Id(WorkspaceId),
    Slug(String),
    /// A header that can name no Workspace (malformed id or slug).
    Nothing,
}

impl Selector {
    pub fn parse(header: Option<&str>) -> Self {
        let Some(value) = header.map(str::trim) else {
            return Self::None;
        };
        if value.starts_with(WorkspaceId::PREFIX) {
            return WorkspaceId::parse(value).map_or(Self::Nothing, Self::Id);
        }
        if crate::slug::is_valid(value) { Self::Slug(value.to_owned()) } else { Self::Nothing }
    }

    pub fn is_given(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// Whether this names the Workspace with `id` and `slug`.
    pub fn names(&self, id: WorkspaceId, slug: &str) -> bool {
        match self {
            Self::Id(wanted) => *wanted == id,
            Self::Slug(wanted) => wanted == slug,
            Self::None | Self::Nothing => false,
        }
    }
}

/// A Workspace as seen by a caller, with what authorization needs.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceAccessRow {
    pub id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub status: StoredWorkspaceStatus,
    /// The caller's role (`None` for an API key).
    pub role: Option<StoredRole>,
    pub plan: String,
    pub trial_end: Option<OffsetDateTime>,
    pub period_end: Option<OffsetDateTime>,
    pub cancel_at_period_end: bool,
    pub limit_overrides: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UserCallerRow {
    pub id: UserId,
    pub email: String,
    pub name: Option<String>,
    pub setup_completed: bool,
    pub sessions_revoked_at: Option<OffsetDateTime>,
}

/// One row of a User lookup: the User, and one of their Workspaces if any.
struct UserAccessRow {
    user_id: UserId,
    email: String,
    user_name: Option<String>,
    setup_completed: bool,
    sessions_revoked_at: Option<OffsetDateTime>,
    workspace_id: Option<WorkspaceId>,
    workspace_name: Option<String>,
    slug: Option<String>,
    status: Option<StoredWorkspaceStatus>,
    role: Option<StoredRole>,
    plan: Option<String>,
    trial_end: Option<OffsetDateTime>,
    period_end: Option<OffsetDateTime>,
    cancel_at_period_end: Option<bool>,
    limit_overrides: Option<Value>,
}

/// The User with this identity and the Workspaces the selector picks among theirs:
/// the named one, or without a selector up to two (two means "ambiguous").
///
/// One statement per kind of selector, so each is a handful of index lookups.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn user_with_workspaces(
    conn: &mut PgConnection,
    issuer: &str,
    subject: &str,
    selector: &Selector,
) -> sqlx::Result<Option<(UserCallerRow, Vec<WorkspaceAccessRow>)>> {
    let rows = match selector {
        Selector::Id(id) => {
            sqlx::query_as!(
                UserAccessRow,
                r#"
                SELECT u.id AS "user_id: UserId", u.email, u.name AS user_name,
                       u.setup_completed_at IS NOT NULL AS "setup_completed!", u.sessions_revoked_at,
                       ws.id AS "workspace_id?: WorkspaceId", ws.name AS "workspace_name?", ws.slug AS "slug?",
                       ws.status AS "status?: StoredWorkspaceStatus", m.role AS "role?: StoredRole", ws.plan AS "plan?", ws.trial_end AS "trial_end?",
                       ws.period_end AS "period_end?", ws.cancel_at_period_end AS "cancel_at_period_end?",
                       ws.limit_overrides AS "limit_overrides?"
                FROM users u
                LEFT JOIN memberships m ON m.user_id = u.id AND m.workspace_id = $3
                LEFT JOIN workspaces ws ON ws.id = m.workspace_id
                WHERE u.issuer = $1 AND u.subject = $2
                "#,
                issuer,
                subject,
                id.0,
            )
            .fetch_all(conn)
            .await?
        }
        Selector::Slug(slug) => {
            sqlx::query_as!(
                UserAccessRow,
                r#"
                SELECT u.id AS "user_id: UserId", u.email, u.name AS user_name,
                       u.setup_completed_at IS NOT NULL AS "setup_completed!", u.sessions_revoked_at,
                       ws.id AS "workspace_id?: WorkspaceId", ws.name AS "workspace_name?", ws.slug AS "slug?",
                       ws.status AS "status?: StoredWorkspaceStatus", m.role AS "role?: StoredRole", ws.plan AS "plan?", ws.trial_end AS "trial_end?",
                       ws.period_end AS "period_end?", ws.cancel_at_period_end AS "cancel_at_period_end?",
                       ws.limit_overrides AS "limit_overrides?"
                FROM users u
                LEFT JOIN (memberships m JOIN workspaces ws ON ws.id = m.workspace_id)
                    ON m.user_id = u.id AND ws.slug = $3
                WHERE u.issuer = $1 AND u.subject = $2
                "#,
                issuer,
                subject,
                slug,
            )
            .fetch_all(conn)
            .await?
        }
        Selector::None | Selector::Nothing => {
            // A header that names nothing still needs the User (set up? revoked?).
            let limit = if matches!(selector, Selector::None) { 2 } else { 0 };
            sqlx::query_as!(
                UserAccessRow,
                r#"
                SELECT u.id AS "user_id: UserId", u.email, u.name AS user_name,
                       u.setup_completed_at IS NOT NULL AS "setup_completed!", u.sessions_revoked_at,
                       w.id AS "workspace_id?: WorkspaceId", w.name AS "workspace_name?", w.slug AS "slug?",
                       w.status AS "status?: StoredWorkspaceStatus", w.role AS "role?: StoredRole", w.plan AS "plan?", w.trial_end AS "trial_end?",
                       w.period_end AS "period_end?", w.cancel_at_period_end AS "cancel_at_period_end?",
                       w.limit_overrides AS "limit_overrides?"
                FROM users u
                LEFT JOIN LATERAL (
                    SELECT ws.id, ws.name, ws.slug, ws.status, m.role, ws.plan, ws.trial_end, ws.period_end,
                           ws.cancel_at_period_end, ws.limit_overrides
                    FROM memberships m
                    JOIN workspaces ws ON ws.id = m.workspace_id
                    WHERE m.user_id = u.id
                    ORDER BY m.workspace_id
                    LIMIT $3
                ) w ON true
                WHERE u.issuer = $1 AND u.subject = $2
                "#,
                issuer,
                subject,
                limit,
            )
            .fetch_all(conn)
            .await?
        }
    };

    let Some(first) = rows.first() else { return Ok(None) };
    let user = UserCallerRow {
        id: first.user_id,
        email: first.email.clone(),
        name: first.user_name.clone(),
        setup_completed: first.setup_completed,
        sessions_revoked_at: first.sessions_revoked_at,
    };
    let workspaces = rows
        .into_iter()
        .filter_map(|r| {
            Some(WorkspaceAccessRow {
                id: r.workspace_id?,
                name: r.workspace_name?,
                slug: r.slug?,
                status: r.status?,
                role: r.role,
                plan: r.plan?,
                trial_end: r.trial_end,
                period_end: r.period_end,
                cancel_at_period_end: r.cancel_at_period_end?,
                limit_overrides: r.limit_overrides?,
            })
        })
        .collect();
    Ok(Some((user, workspaces)))
}

/// A presented API key's row, with what authentication needs.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyCallerRow {
    pub id: ApiKeyId,
    pub public_id: String,
    pub secret_hash: Vec<u8>,
    pub scopes: Vec<String>,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

/// The key with this public id and its Workspace, in one round trip.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn key_with_workspace(
    conn: &mut PgConnection,
    public_id: &str,
) -> sqlx::Result<Option<(KeyCallerRow, WorkspaceAccessRow)>> {
    let row = sqlx::query!(
        r#"
        SELECT k.id AS "key_id: ApiKeyId", k.public_id, k.secret_hash, k.scopes, k.last_used_at, k.revoked_at,
               w.id AS "workspace_id: WorkspaceId", w.name, w.slug, w.status AS "status: StoredWorkspaceStatus",
               w.plan, w.trial_end, w.period_end, w.cancel_at_period_end, w.limit_overrides
        FROM api_keys k
        JOIN workspaces w ON w.id = k.workspace_id
        WHERE k.public_id = $1
        "#,
        public_id,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| {
        let key = KeyCallerRow {
            id: r.key_id,
            public_id: r.public_id,
            secret_hash: r.secret_hash,
            scopes: r.scopes,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
        };
        let workspace = WorkspaceAccessRow {
            id: r.workspace_id,
            name: r.name,
            slug: r.slug,
            status: r.status,
            role: None,
            plan: r.plan,
            trial_end: r.trial_end,
            period_end: r.period_end,
            cancel_at_period_end: r.cancel_at_period_end,
            limit_overrides: r.limit_overrides,
        };
        (key, workspace)
    }))
}
